"""The private Hydra and submitit API andrea uses (andrea/train/hydra_internals.py) is still there: an upgrade
that moves any of it fails here, by name, not somewhere inside a sweep."""

import inspect
from importlib.metadata import version

import pytest
from hydra.core.utils import JobReturn, JobStatus

from andrea import hydra_internals


@pytest.mark.parametrize("package", sorted(hydra_internals.CHECKED_WITH))
def test_the_versions_they_were_checked_with_are_the_ones_installed(package):
    checked = hydra_internals.CHECKED_WITH[package]
    assert version(package) == checked, (
        f"{package} {version(package)} is installed, andrea's internals were checked with {checked}: "
        "re-check andrea/train/hydra_internals.py, then update CHECKED_WITH"
    )


def test_a_failed_job_carries_its_error_where_hydra_raises_it_from():
    error = RuntimeError("the job died")
    ret = hydra_internals.failed_job(["a=1"], error)
    assert ret.status is JobStatus.FAILED and hydra_internals.job_error(ret) is error
    with pytest.raises(RuntimeError, match="the job died"):
        _ = ret.return_value  # Hydra's own accessor re-raises the field andrea fills
    assert "_return_value" in inspect.signature(JobReturn).parameters


def test_the_submitit_launcher_still_submits_through_map_array_and_reads_results():
    submitit = pytest.importorskip("submitit", reason="the `sweep` extra is not installed")
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import BaseSubmititLauncher

    source = inspect.getsource(BaseSubmititLauncher.launch)
    assert "executor.map_array(self, *zip(*job_params))" in source, "the launcher no longer submits with map_array"
    assert "j.results()[0] for j in jobs" in source, "the launcher no longer reads each job's results()"
    assert '"hydra.sweep.dir",\n                    idx,' in source, "the job number is no longer map_array's 3rd list"

    original = submitit.AutoExecutor.map_array
    with hydra_internals.each_job_settled(lambda job, overrides, number: (job, overrides, number)):
        assert submitit.AutoExecutor.map_array is not original
    assert submitit.AutoExecutor.map_array is original
