"""``bench/command_integral.py`` on a tiny Go2 checkpoint: gain 0 is the policy as trained (the same loop as a
zero correction limit), a gain moves the command shown to the policy within its limit, bad gains are refused."""

from __future__ import annotations

import command_integral
import pytest
import torch


def integral(checkpoint: str, *extra: str) -> dict:
    return command_integral.main([checkpoint, "--envs", "1", "--settle-s", "0.04", "--measure-s", "0.1",
                                  "--threads", "1", *extra])


@pytest.mark.slow
def test_gain_zero_is_the_trained_policy_and_a_gain_corrects_within_its_limit(checkpoint, capsys):
    plain = integral(checkpoint, "--gains", "0,5", "--limit", "0")  # limit 0: the loop cannot move the command
    assert plain["err"][0] == plain["err"][1] and plain["reached"][0] == plain["reached"][1]
    loop = integral(checkpoint, "--gains", "0,5", "--limit", "0.05")
    assert loop["err"][0] == plain["err"][0]  # gain 0 does not depend on the limit
    u = torch.tensor(loop["u"][5.0])  # [commands, 2]
    assert u.abs().max() > 0 and u.abs().max() <= 0.05 + 1e-7
    assert loop["err"][1] != plain["err"][1]  # the corrected command changed what the robot did
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith(f"command_integral: gains=0,5 err={loop['err'][0]:.4f},{loop['err'][1]:.4f} reached=")


@pytest.mark.slow
def test_band_integrates_only_errors_inside_it(checkpoint):
    always = integral(checkpoint, "--gains", "0,5", "--limit", "0.05")
    wide = integral(checkpoint, "--gains", "0,5", "--limit", "0.05", "--band", "100")  # every error is inside
    assert wide["err"] == always["err"] and wide["u"][5.0] == always["u"][5.0]
    # a band below every error: nothing is integrated, so gain 5 drives the robot as gain 0 does
    narrow = integral(checkpoint, "--gains", "0,5", "--limit", "0.05", "--band", "1e-9")
    assert torch.tensor(narrow["u"][5.0]).abs().max() == 0
    assert narrow["err"][1] == narrow["err"][0] == always["err"][0]


def test_bad_gains_are_refused_in_one_line(capsys):
    for bad in ("0,x", "-1"):
        with pytest.raises(SystemExit):
            command_integral.parse_args(["run", "--gains", bad])
    assert "--gains" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        command_integral.parse_args(["run", "--band", "-0.1"])
    assert "--band >= 0" in capsys.readouterr().err
