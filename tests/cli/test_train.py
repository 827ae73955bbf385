"""andrea-train as a user runs it: the console script, from another folder."""

import csv
import os
import re
import subprocess
import sys
from importlib.metadata import distribution
from pathlib import Path

import pytest

from tests.compose import QUICK, group_options
from tests.train.wandb_reader import run_info

SCRIPT = str(Path(sys.executable).with_name("andrea-train"))


def run(args, cwd, env=None, timeout=240):
    return subprocess.run(
        [SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})}
    )


IMPORTED = """
import sys
from andrea.cli.train import main
sys.argv = ["andrea-train", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("imported:", *sorted(name for name in ("torch", "lightning", "wandb") if name in sys.modules))
"""


@pytest.mark.parametrize("args", [["--cfg", "job"], ["--cfg", "hydra"], ["--info", "searchpath"]])
def test_the_config_is_printed_without_importing_torch(tmp_path, args):
    """Hydra imports andrea's callbacks and launchers for every command; what they import must not bring in
    torch, Lightning or wandb (seconds), which only a job needs."""
    done = subprocess.run([sys.executable, "-c", IMPORTED, *args], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "imported:", done.stdout.splitlines()[-1]


def test_help_imports_torch_only_to_check_installed_plugins(tmp_path):
    """--help loads andrea's registries (torch with them) only to say which installed plugin cannot load."""
    from andrea.cli.app import plugin_groups

    done = subprocess.run([sys.executable, "-c", IMPORTED, "--help"], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert ("torch" in done.stdout.splitlines()[-1]) == bool(plugin_groups()), done.stdout.splitlines()[-1]
    assert "lightning" not in done.stdout.splitlines()[-1]


@pytest.mark.slow(reason="three andrea-train processes, two through Hydra's own help (2 s each)")
def test_help_lists_the_groups_hydra_lists(tmp_path):
    """--help's config groups, read from the config folders, are Hydra's own listing ($APP_CONFIG_GROUPS, which an
    argument naming hydra.* sends --help through) of the same search path, line for line; and --help with nothing
    else prints the same page Hydra renders from the same template."""
    from andrea.train.config_groups import help_lines

    listed = run(["--help", "hydra.help.template=$APP_CONFIG_GROUPS"], tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.rstrip("\n") == help_lines()
    assert run(["--help"], tmp_path).stdout == run(["--help", "hydra.job.chdir=false"], tmp_path).stdout


def test_help_lists_every_group(tmp_path):
    result = run(["--help"], tmp_path)
    assert result.returncode == 0
    assert "andrea-train: train any model of the andrea attention zoo" in result.stdout
    groups = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    for group in ("attention", "mask"):  # andrea's own options; an installed plugin's join them
        assert set(groups[group].split(", ")) >= set(group_options(group)), groups[group]
    for line in (
        "heads: gqa, mha, mla, mqa",
        "model: andrea-120m, andrea-12m, andrea-12m-hybrid, andrea-tiny, deepseek-v32, falcon-h1, gemma3, gpt-oss,"
        " kimi-linear, llama4, olmo3, qwen3-next, toy",
        "logger: csv, many_loggers, none, tensorboard, wandb",
        "trainer: cpu, ddp, ddp_cpu, default, fsdp, gpu",
        "experiment: " + ", ".join(group_options("experiment")),
    ):
        assert line in result.stdout
    from andrea.train.experiments import summaries

    listed = result.stdout.split("== Experiments (experiment=<name>) ==")[1]
    for name, summary in summaries().items():  # each experiment in one line: what it does
        assert re.search(rf"^  {re.escape(name)} +{re.escape(summary)}$", listed, re.M), name
    scripts = {ep.name for ep in distribution("andrea").entry_points if ep.group == "console_scripts"}
    others = listed.split("Other commands (each with --help):")[1]
    assert {line.split()[0] for line in others.splitlines()[1:] if line.startswith("  andrea-")} == set(scripts) - {
        "andrea-train"
    }  # every other command named


@pytest.mark.slow  # reason: an andrea-train process (4 s)
def test_cfg_job_shows_the_composed_config(tmp_path):
    result = run(["--cfg", "job", "attention=eager", "heads=mqa"], tmp_path)
    assert result.returncode == 0
    assert "backend: eager" in result.stdout and "n_kv_head: 1" in result.stdout
    assert not (tmp_path / "logs").exists()  # printing a config runs nothing


@pytest.mark.slow  # reason: an andrea-train process (4 s)
def test_shell_completion(tmp_path):
    result = run(["-sc", "query=bash"], tmp_path, env={"COMP_LINE": "andrea-train attention="})
    assert result.returncode == 0
    assert set(result.stdout.split()) >= {f"attention={name}" for name in group_options("attention")}


@pytest.mark.slow  # reason: an andrea-train process per refusal
def test_bad_config_is_one_line_and_exit_2(tmp_path):
    result = run(["heads.n_kv_head=3"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "andrea-train: error: heads.n_kv_head=3 does not divide heads.n_head=4; choose one of [1, 2, 4] (4 = MHA, 1 "
        "= MQA)"
    ]
    assert not list(tmp_path.glob("logs/train/runs/*"))  # refused before any work: no run dir left behind


@pytest.mark.slow(reason="two andrea-train runs as subprocesses (~7 s)")
def test_a_refused_resume_keeps_its_run_dir(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text("the first attempt's config\n")
    result = run(["heads.n_kv_head=3", f"hydra.run.dir={run_dir}"], tmp_path)
    assert result.returncode == 2
    assert (run_dir / ".hydra" / "config.yaml").read_text() == "the first attempt's config\n"


SLOW = pytest.mark.slow  # an andrea-train process each (4 s): one refusal in the default run


@pytest.mark.parametrize(
    "override, message",
    [
        pytest.param(
            "model.net.width=3",
            "Could not override 'model.net.width'. To append to your config use +model.net.width=3",
            marks=SLOW,
        ),
        (
            "attention=fast",
            "In 'train': Could not find 'attention/fast' Available options in 'attention': ",  # + plugins
        ),
        pytest.param(
            "experiment=nope",
            "In 'train': Could not find 'experiment/nope' Available options in 'experiment': "
            + " ".join(group_options("experiment")),  # every preset in conf/experiment, named in order
            marks=SLOW,
        ),
        pytest.param("trainer.max_epochs=[1", "trainer.max_epochs=[1: no viable alternative at input '[1'", marks=SLOW),
    ],
)
def test_hydra_s_own_refusals_are_one_line_and_exit_2(override, message, tmp_path):
    result = run([override], tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"andrea-train: error: {message}")
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow(
    reason="andrea-train from another folder, trained (~9 s); tests/cli/test_console_scripts.py runs there too"
)
def test_run_from_another_folder_with_csv_logger(tmp_path):
    result = run([*QUICK, "logger=csv", "callbacks.attention_maps.every_n_steps=2"], tmp_path)
    assert result.returncode == 0, result.stderr
    (run_dir,) = tmp_path.glob("logs/train/runs/*")
    lines = result.stdout.splitlines()  # piped: whole lines, never wrapped at 80 columns, no live bar
    assert f"run dir: {run_dir}" in lines and any(line.startswith("done in ") for line in lines)
    progress = [line for line in lines if line.startswith("step ")]
    assert progress and all("train/loss_step=" in line for line in progress) and "it/s" not in result.stdout
    with open(run_dir / "csv" / "version_0" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    losses = [float(r["train/loss_step"]) for r in rows if r.get("train/loss_step")]
    assert len(losses) == 4 and all(0 < loss < 10 for loss in losses)  # 256 rows / batch 64, one per step
    assert any(r.get("lr-AdamW/pg1") for r in rows)  # one learning rate per parameter group
    assert sorted(p.name for p in (run_dir / "attention_maps").glob("*.png")) == [
        "layer0_step000000.png", "layer0_step000002.png", "layer0_step000004.png"
    ]  # fmt: skip


@pytest.mark.slow(reason="a two-job sweep through andrea-train with wandb (~15 s)")
def test_multirun_sweep_summary_and_wandb_groups(tmp_path):
    sweep_dir = tmp_path / "sweep"
    result = run(["-m", "attention=naive,eager", "heads=mha,gqa", *[o for o in QUICK if o != "logger=none"],
                  f"hydra.sweep.dir={sweep_dir}"], tmp_path)  # fmt: skip
    assert result.returncode == 0, result.stderr
    with open(sweep_dir / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["job"] for r in rows] == ["0", "1", "2", "3"]
    assert [r["overrides"].split()[:2] for r in rows] == [
        ["attention=naive", "heads=mha"], ["attention=naive", "heads=gqa"],
        ["attention=eager", "heads=mha"], ["attention=eager", "heads=gqa"],
    ]  # fmt: skip
    for row in rows:
        assert row["status"] == "completed"
        assert 0 < float(row["val_loss"]) < 10 and float(row["tokens_per_s"]) > 0 and float(row["wall_s"]) > 0
        info = run_info(row["run_dir"])  # one offline wandb run per job, grouped by the sweep
        assert info.run_group == sweep_dir.name and info.display_name.startswith(row["job"] + ":")
    assert [r["differs"] for r in rows] == [
        "attention=naive heads=mha", "attention=naive heads=gqa",
        "attention=eager heads=mha", "attention=eager heads=gqa",
    ]  # fmt: skip
    assert [int(r["parameters"]) for r in rows] == [9344, 8320, 9344, 8320]  # GQA: half the k and v weights
    summary = (sweep_dir / "summary.md").read_text().splitlines()
    assert summary[0].startswith("| job | overrides | differs | status | exit_code | error | parameters |")
    assert len([line for line in summary if line.startswith("|")]) == 2 + 4  # (a busy machine adds a note below)
    # the sweep's console: a line per job and one line with the report, never the jobs' tables and bars
    assert result.stdout.splitlines()[-1] == f"sweep report: {sweep_dir / 'report.html'} (4 of 4 jobs completed)"
    assert len(result.stdout.splitlines()) < 20 and "Trainable params" not in result.stdout
    assert (sweep_dir / "curves.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow(reason="an andrea-train process (~10 s); tests/train/test_sweep_checks.py checks the same in-process")
def test_a_sweep_with_a_job_that_would_be_refused_launches_none(tmp_path):
    """Every job's config is checked before any launches (andrea.train.sweep_checks): one line, exit 2, no sweep dir."""
    sweep_dir = tmp_path / "sweep"
    result = run(["-m", "heads.n_kv_head=1,3", *QUICK, f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr[-2000:]
    assert result.stderr == (
        f"andrea-train: error: job 1 (heads.n_kv_head=3 {' '.join(QUICK)}) is refused, so the sweep launched no job: "
        "heads.n_kv_head=3 does not divide heads.n_head=4; choose one of [1, 2, 4] (4 = MHA, 1 = MQA)\n"
    )
    assert not sweep_dir.exists()


@pytest.mark.slow(reason="a two-job sweep through andrea-train (~9 s); the default run keeps the six-job one")
def test_multirun_marks_a_failed_job(tmp_path):
    """A job that fails while it trains (a learning rate that makes the loss infinite) gets its row; the others run."""
    sweep_dir = tmp_path / "sweep"
    result = run(["-m", "model.optimizer.lr=0.001,1e30", *QUICK, f"hydra.sweep.dir={sweep_dir}"], tmp_path)
    assert result.returncode == 1  # the sweep reports the failure in one line...
    assert result.stderr.strip().splitlines()[-1] == (
        f"andrea-train: error: 1 of 2 jobs did not complete: job 1 (model.optimizer.lr=1e+30 {' '.join(QUICK)}) "
        f"failed, exit 1; every job's row is in {sweep_dir / 'report.html'}"
    )
    assert "Traceback" not in result.stderr and "Error executing job" not in result.stderr  # andrea's line alone
    with open(sweep_dir / "summary.csv") as f:
        rows = {r["job"]: r for r in csv.DictReader(f)}
    assert rows["0"]["status"] == "completed" and float(rows["0"]["val_loss"]) > 0  # ...the good job keeps its row
    assert (rows["1"]["status"], rows["1"]["exit_code"]) == ("failed", "1")
    assert rows["1"]["error"].startswith("NonFiniteLossError: train/loss is ")
    assert (sweep_dir / "0" / "checkpoints" / "last.ckpt").exists()


@pytest.mark.slow  # reason: every job is a fresh process that imports torch and Lightning (~10 s each)
def test_local_launcher_keeps_a_row_for_a_killed_job(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the optional `sweep` extra is not installed")
    sweep_dir = tmp_path / "sweep"
    # job 0 adds a no-op callback; job 1's "callback" is os.abort: its process dies of SIGABRT
    result = run(
        [
            "-m",
            "hydra/launcher=local",
            "+callbacks.extra._target_=lightning.pytorch.callbacks.Callback,os.abort",
            *QUICK,
            f"hydra.sweep.dir={sweep_dir}",
        ],
        tmp_path,
        timeout=600,
    )
    assert result.returncode == 1
    (line,) = [line for line in result.stderr.splitlines() if line.startswith("andrea-train: error:")]
    assert line.startswith(
        "andrea-train: error: 1 of 2 jobs did not complete: job 1 (+callbacks.extra._target_=os.abort"
    )
    assert line.endswith(f"killed, exit code unknown; every job's row is in {sweep_dir / 'report.html'}")
    assert "Traceback" not in result.stderr and "Error executing job" not in result.stderr  # andrea's line alone
    # the completed job's one line reaches the console, as under the default launcher
    (job_line,) = [line for line in result.stdout.splitlines() if line.startswith("job ")]
    assert job_line.startswith("job 0 (+callbacks.extra._target_=lightning.pytorch.callbacks.Callback")
    assert ": done in " in job_line
    with open(sweep_dir / "summary.csv") as f:
        rows = {r["job"]: r for r in csv.DictReader(f)}
    assert (rows["0"]["status"], rows["0"]["exit_code"]) == ("completed", "0") and float(rows["0"]["val_loss"]) > 0
    assert (rows["1"]["status"], rows["1"]["exit_code"]) == ("killed", "")  # submitit's controller keeps no exit code
    assert (
        rows["1"]["error"].startswith("JobDied: its process ended without a result")
        and "_log.err" in rows["1"]["error"]
    )


@pytest.mark.slow  # reason: an Optuna study of several training jobs
def test_optuna_hparams_search(tmp_path):
    pytest.importorskip("hydra_plugins.hydra_optuna_sweeper", reason="the optional `sweep` extra is not installed")
    sweep_dir = tmp_path / "sweep"
    result = run(["hparams_search=optuna", "hydra.sweeper.n_trials=3", "hydra.sweeper.sampler.n_startup_trials=2",
                  *QUICK, f"hydra.sweep.dir={sweep_dir}"], tmp_path, timeout=600)  # fmt: skip
    assert result.returncode == 0, result.stderr
    with open(sweep_dir / "summary.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 and all(r["status"] == "completed" for r in rows)
    assert "best_value" in (sweep_dir / "optimization_results.yaml").read_text()


@pytest.mark.slow  # reason: builds a wheel and installs it into a folder of its own
def test_non_editable_install(tmp_path):
    """A wheel install (no source tree) finds conf/ as the package andrea.conf."""
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path / "dist"), str(root)], check=True, timeout=300)  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("andrea-*.whl")
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=300)  # fmt: skip
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([str(target / "bin" / "andrea-train"), "--cfg", "job", "attention=naive"], cwd=elsewhere,
                            env=env, capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "backend: naive" in result.stdout
    import_path = subprocess.run([sys.executable, "-c", "import andrea.conf; print(andrea.conf.__file__)"],
                                 cwd=elsewhere, env=env, capture_output=True, text=True).stdout  # fmt: skip
    assert import_path.startswith(str(target))


@pytest.mark.slow  # reason: an andrea-train process that trains (15 s)
def test_the_verdict_is_the_last_thing_a_run_prints(tmp_path):
    """andrea's summary ends on the verdict; wandb's banner, history and summary are not on the console (its run
    folder keeps them)."""
    from tests.compose import plain_env

    args = [SCRIPT, "experiment=induction", "data.num_train=512", "data.num_val=64", "trainer.max_epochs=1"]
    env = plain_env(tmp_path / "home")  # the default logger: wandb, offline
    done = subprocess.run(args, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=240, env=env)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:]
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert lines[-1].startswith("verdict: needs an induction head in a layer >= 1: "), lines[-5:]
    assert not [line for line in lines if line.startswith("wandb: ")]
    assert list(tmp_path.glob("logs/induction/runs/*/wandb/offline-run-*/run-*.wandb"))  # its history, kept


@pytest.mark.parametrize(
    "value, message",
    [
        pytest.param(
            "0",
            "hydra.launcher.wait_limit_min=0.0 is no time to wait: give minutes > 0, or null for no limit",
            marks=pytest.mark.slow(reason="an andrea-train process (~9 s); the other value keeps the default run's"),
        ),
        ("soon", "hydra.launcher.wait_limit_min=soon: Value 'soon' of type 'str' could not be converted to Float"),
    ],
)
def test_a_wait_limit_that_is_no_time_is_refused_before_any_job_is_submitted(tmp_path, value, message):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the optional `sweep` extra is not installed")
    sweep_dir = tmp_path / "sweep"
    done = run(["-m", "hydra/launcher=slurm", f"hydra.launcher.wait_limit_min={value}", *QUICK,
                f"hydra.sweep.dir={sweep_dir}"], tmp_path)  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("andrea-train: error: ") and message in line
    assert not (sweep_dir / ".submitit").exists()  # nothing submitted


# what the quiet console keeps off the console (for the run's log): the srun hint, Lightning's tip, accelerator
# lines and model table, wandb's own lines
SILENCED = ("srun", "Tip", "wandb:", "GPU available", "Params")


@pytest.mark.slow(reason="the default run as a process, piped (~14 s)")
def test_the_default_run_prints_andrea_s_lines_only_and_logs_the_rest(tmp_path):
    """In a user's plain shell (no WANDB_SILENT): andrea's lines and one progress line every 50 steps, at most 40
    lines in all; other tools' lines (Lightning's accelerator lines, tips and model table, the srun hint, wandb's
    banner and history) in the run's log file, not on the console."""
    import shutil

    from tests.compose import plain_env

    (tmp_path / "home").mkdir()
    done = subprocess.run(
        [SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=240, env=plain_env(tmp_path / "home")
    )
    assert done.returncode == 0, done.stderr[-2000:]
    printed = (done.stdout + done.stderr).splitlines()
    assert len(printed) <= 40 and not done.stderr, printed
    assert not [line for line in printed if any(word in line for word in SILENCED)]
    assert [line for line in printed if line.startswith("dashboard: wandb's offline run ")]  # andrea says where
    progress = [line for line in printed if line.startswith("step ")]
    assert progress[0].startswith("step 50/192 epoch 0 train/loss_step=")  # the planned steps, counted
    for line in progress:  # a validation's numbers once, on the line after it, never repeated as news
        assert ("val/loss=" in line) == (line.split()[1].split("/")[0] in ("64", "128", "192")), line
    assert printed[-1].startswith("verdict: ")
    (log,) = tmp_path.glob("logs/train/runs/*/train.log")
    kept = log.read_text()
    assert "GPU available" in kept and "Trainable params" in kept  # silenced, not lost
    assert ("The `srun` command is available" in kept) == (shutil.which("srun") is not None)


@pytest.mark.slow(reason="the default run on a pseudo-terminal (~15 s)")
def test_on_a_terminal_the_default_run_shows_rich_s_bar_and_andrea_s_lines_only(tmp_path):
    """What a user's terminal shows: Rich's live bar, without the logger's version number, then andrea's summary;
    none of the lines the quiet console keeps for the log."""
    from tests.compose import plain_env

    (tmp_path / "home").mkdir()
    primary, secondary = os.openpty()
    env = plain_env(tmp_path / "home") | {"TERM": "xterm-256color", "COLUMNS": "120"}
    with subprocess.Popen([SCRIPT], cwd=tmp_path, env=env, stdin=secondary, stdout=secondary, stderr=secondary) as proc:
        os.close(secondary)
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=240) == 0
    os.close(primary)
    shown = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode(errors="replace"))
    assert "Epoch 2/2" in shown and "train/loss_step" in shown  # Rich's bar, with the step's numbers
    assert "v_num" not in shown
    assert not [word for word in SILENCED if word in shown]
    assert "verdict: this task needs no attention" in shown
