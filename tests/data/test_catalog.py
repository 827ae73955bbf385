"""andrea.data.catalog, the one registry of data modules that what a file says about data is read through: each
module under the name it gives itself, every data option's `_target_` in it, and each task rebuilt from a run's
recorded config through it (andrea-inspect's data_from_run), its evaluation sets included."""

import json

import pytest
import yaml

import andrea.data
from andrea.data.catalog import DATA_MODULES, TARGETS, TASKS, data_class, task_class
from andrea.data.from_run import data_from_run
from tests.compose import CONF


def test_each_data_module_is_registered_under_the_name_it_gives_itself():
    assert {name: data_class(name).name for name in DATA_MODULES} == {name: name for name in DATA_MODULES}
    assert all(getattr(andrea.data, target.rpartition(".")[2]) is data_class(name) for target, name in TARGETS.items())


def test_every_data_option_names_a_registered_module_and_every_module_has_an_option():
    targets = {path.stem: yaml.safe_load(path.read_text())["_target_"] for path in (CONF / "data").glob("*.yaml")}
    assert {option: target for option, target in targets.items() if target not in TARGETS} == {}
    assert {TARGETS[target] for target in targets.values()} == set(DATA_MODULES)


def option(name: str) -> dict:
    """The settings of the task's data option (conf/data/<name>.yaml), its interpolations left to the defaults."""
    values = yaml.safe_load((CONF / "data" / f"{name}.yaml").read_text())
    return {key: value for key, value in values.items() if key != "_target_" and not str(value).startswith("${")}


@pytest.mark.parametrize("name", sorted(TASKS))
def test_each_task_is_rebuilt_from_the_config_a_run_recorded(name, tmp_path):
    task = task_class(name)(**option(name) | {"eval_sets": {"other": {"seed": 1}}})
    spellings = [target for target, registered in TARGETS.items() if registered == name]
    for target in spellings:  # where the class lives, and as andrea.data exports it
        config = {"_target_": target, **task.settings()}
        (tmp_path / "result.json").write_text(json.dumps({"status": "completed", "config": {"data": config}}))
        rebuilt = data_from_run(tmp_path)
        assert isinstance(rebuilt, type(task)) and type(rebuilt) is type(task)
        assert rebuilt.settings() == task.settings()
    assert len(spellings) == 2


@pytest.mark.parametrize(
    "data, message",
    [
        ({"_target_": "os.system"}, "config.data._target_='os.system' is not one of andrea's data modules"),
        ({"_target_": ["andrea.data.MQARDataModule"]}, "config.data._target_=['andrea.data.MQARDataModule'] is not"),
        ({"_target_": "andrea.data.MQARDataModule", "seq_lenn": 8}, "config.data.seq_lenn is not a setting of MQAR"),
        (
            {"_target_": "andrea.data.MQARDataModule", "eval_sets": {"long": [1, 2]}},
            "config.data.eval_sets holds more than plain values (strings, numbers,",
        ),
    ],
)
def test_a_recorded_data_config_that_is_not_one_of_ours_to_build_is_refused_in_one_line(data, message, tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"status": "completed", "config": {"data": data}}))
    with pytest.raises(ValueError) as refused:
        data_from_run(tmp_path)
    said = str(refused.value)
    assert said.startswith(f"{tmp_path / 'result.json'}: {message}") and "\n" not in said
