"""The private Hydra and submitit API andrea uses (andrea/train/hydra_internals.py) is still there: an upgrade
that moves any of it fails here, by name, not somewhere inside a sweep."""

import inspect
from importlib.metadata import version

import pytest
from hydra.core.utils import JobReturn, JobStatus

from andrea.train import hydra_internals


@pytest.mark.parametrize("package", sorted(hydra_internals.CHECKED_WITH))
def test_the_versions_they_were_checked_with_are_the_ones_installed(package):
    checked = hydra_internals.CHECKED_WITH[package]
    assert version(package) == checked, (
        f"{package} {version(package)} is installed, andrea's internals were checked with {checked}: "
        "re-check andrea/train/hydra_internals.py, then update CHECKED_WITH"
    )


def test_a_failed_job_carries_its_error_where_hydra_raises_it_from(capsys):
    error = RuntimeError("the job died")
    ret = hydra_internals.failed_job(["a=1"], error)
    assert ret.status is JobStatus.FAILED and hydra_internals.job_error(ret) is error
    with pytest.raises(RuntimeError, match="the job died"):
        _ = ret.return_value  # the accessor Hydra's sweeper reads re-raises the field andrea fills...
    assert capsys.readouterr().err == ""  # ...without Hydra's "Error executing job" ahead of andrea's line
    assert "_return_value" in inspect.signature(JobReturn).parameters


def test_a_job_return_of_hydra_s_own_is_quieted(capsys):
    own = JobReturn(overrides=["a=1"], status=JobStatus.FAILED, _return_value=ValueError("bad"))
    with pytest.raises(ValueError):
        _ = own.return_value
    assert "Error executing job with overrides: ['a=1']" in capsys.readouterr().err  # Hydra's, what quiet() removes
    hydra_internals.quiet(own)
    with pytest.raises(ValueError, match="bad"):
        _ = own.return_value
    assert capsys.readouterr().err == ""
    done = JobReturn(status=JobStatus.COMPLETED, _return_value=1.5)
    hydra_internals.quiet(done)
    assert done.return_value == 1.5


def test_submit_builds_what_the_plugins_launch_builds():
    """`submit` is the plugin's `launch` up to its map_array: the pieces it reads are still the plugin's."""
    pytest.importorskip("submitit", reason="the `sweep` extra is not installed")
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher, LocalLauncher

    source = inspect.getsource(BaseSubmititLauncher.launch)
    for piece in (
        'specific_init_keys = {"max_num_timeout"}',
        'init_params = {"folder": self.params["submitit_folder"]}',
        "submitit.AutoExecutor(cluster=self._EXECUTOR, **init_params)",
        "baseparams = set(OmegaConf.structured(BaseQueueConf).keys())",
        'if "mode" in self.config.hydra.sweep:',
        '"hydra.sweep.dir",\n                    idx,\n                    f"job_id_for_{idx}",\n'
        "                    Singleton.get_state(),",
        "jobs = executor.map_array(self, *zip(*job_params))",
        "return [j.results()[0] for j in jobs]",
    ):
        assert piece in source, f"the submitit launcher's launch changed: {piece!r} is gone; re-check submit()"
    assert LocalLauncher._EXECUTOR == "local" and "timeout_min" in BaseQueueConf.__dataclass_fields__
    assert list(inspect.signature(BaseSubmititLauncher.__call__).parameters)[1:] == [
        "sweep_overrides", "job_dir_key", "job_num", "job_id", "singleton_state"
    ]  # fmt: skip


def test_andreas_launchers_patch_nothing():
    submitit = pytest.importorskip("submitit", reason="the `sweep` extra is not installed")
    import hydra_plugins.andrea_launchers as launchers

    assert submitit.AutoExecutor.map_array is submitit.Executor.map_array
    assert "launch" in vars(launchers._KeepEveryJob)  # its own launch, through hydra_internals.submit
