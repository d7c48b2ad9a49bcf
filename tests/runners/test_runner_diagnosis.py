"""The runner ends training with the diagnosis of its own curves (rlcore.report.diagnosis, as rlcore.report)."""

from __future__ import annotations

from runner_helpers import base_cfg, make_env

from rlcore.report.diagnosis import diagnose, format_findings, load_scalars
from rlcore.runners import OnPolicyRunner


def test_learn_prints_the_diagnosis_of_the_run_it_wrote(tmp_path, capsys):
    runner = OnPolicyRunner(make_env(num_envs=16), base_cfg(logger="tensorboard", max_iterations=4), str(tmp_path))
    runner.learn(4)
    out = capsys.readouterr().out.strip()
    scalars = load_scalars(str(tmp_path))
    assert len(scalars["Loss/value"]) == 4  # the curves it diagnosed are those of these 4 iterations
    expected = format_findings(diagnose(scalars, runner.cfg))
    assert out.endswith(expected) and expected.startswith("Diagnosis")


def test_no_diagnosis_without_curves_on_disk(tmp_path, capsys):
    OnPolicyRunner(make_env(num_envs=16), base_cfg(logger="none"), str(tmp_path)).learn(2)
    assert "Diagnosis" not in capsys.readouterr().out
