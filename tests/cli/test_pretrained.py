"""Shipped pretrained policies and playing an ONNX file alone (``play pretrained=<name>`` / ``play onnx=<file>``).

- every shipped file is small, carries the interface of its registry entry, and walks: the pretrained Go2 teacher
  tracks its commands on the nominal robot without falling;
- an ONNX file alone is replayed with the task rebuilt from its metadata (history length, gains, command ranges),
  and its onnxruntime actor, built from the metadata only, gives the checkpoint's torch actions step by step,
  recurrent state and resets included;
- bad input is one line: unknown name (lists the shipped ones), task mismatch, a file without rlcore metadata,
  a file of a task that cannot be rebuilt, pretrained= together with checkpoint=.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from cli_helpers import REPO_ROOT, assert_user_error, check_ok, cli_env, run_module

from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy
from rlcore.config.cli import UserError, parse_key_values
from rlcore.config.schema import PlayCfg
from rlcore.deployment import read_onnx_interface
from rlcore.env.task import find_pretrained
from rlcore.play import OnnxActor, onnx_interface, play, policy_source
from rlcore_tasks.go2.pretrained import PRETRAINED

pytestmark = pytest.mark.slow  # most tests train a run or walk the shipped policies

pytest.importorskip("mujoco")


def play_args(*keys: str) -> dict:
    return parse_key_values(list(keys), PlayCfg, "play")


def test_shipped_files_are_small_and_carry_their_interface():
    total = 0
    for name, entry in PRETRAINED.items():
        path = find_pretrained(name).path
        total += os.path.getsize(path)
        meta = read_onnx_interface(path)
        assert meta["task"] == entry.task and meta["robot"] == "unitree_go2", name
        assert entry.command.startswith("python -m rlcore.train task=" + entry.task), name
        assert "nominal_err=" in entry.robustness and "falls=" in entry.robustness, name
    assert total < 5 * 2**20  # well under 5 MB together


@pytest.mark.parametrize("name", ["go2_flat", "go2_flat_student"])
def test_pretrained_go2_walks_on_the_nominal_robot(capsys, name):
    """200 control steps (4 s) of a shipped policy (the teacher; its blind LSTM student, recurrent state fed back)
    on 4 envs with random commands: nobody falls, and the planar tracking error is that of a walking policy (a
    standing one scores ~0.5 m/s on these ranges)."""
    result = play(play_args("task=go2", f"pretrained={name}", "episodes=1", "num_envs=4", "max_steps=200",
                            "threads=1", "seed=2"))
    out = capsys.readouterr().out
    assert f"pretrained={name} (onnxruntime, interface from the file)" in out
    assert result["returns"] == [] and result["steps"] == 200  # no episode ended: no fall
    assert result["metrics"]["metrics/lin_vel_error_now"] < 0.15
    assert result["metrics"]["physics_failures"] == 0.0


@pytest.fixture(scope="module")
def rnn_history_run(tmp_path_factory):
    """A tiny recurrent Go2 run with a 3-frame observation history and kp 27 (its policy.onnx is exported at the
    end of training)."""
    run_dir = tmp_path_factory.mktemp("pretrained") / "go2_rnn"
    check_ok(run_module(
        "rlcore.train", "task=go2", "model=rnn", "task.num_envs=4", "runner.num_steps_per_env=4",
        "runner.max_iterations=1", "runner.save_interval=1", "logger=none", "model.actor.rnn_hidden_dim=8",
        "model.critic.rnn_hidden_dim=8", "model.actor.hidden_dims=[16]", "model.critic.hidden_dims=[16]",
        "algorithm.num_mini_batches=1", "algorithm.num_learning_epochs=1", "+task.env.sim.threads=1",
        "+task.env.domain_rand.num_variants=2", "task.env.obs.history_length=3", "task.env.control.kp=27.0",
        "task.obs_groups.actor=[policy,policy_history]", "task.env.commands.lin_vel_y=[-0.3,0.3]", "seed=4",
        f"hydra.run.dir={run_dir}"))
    onnx = run_dir / "policy.onnx"
    assert onnx.is_file()
    return run_dir, onnx


def test_onnx_alone_rebuilds_the_task_from_its_metadata(rnn_history_run):
    _, onnx = rnn_history_run
    source = policy_source(play_args(f"onnx={onnx}"), "cpu")
    env = make_run_env(source.info, 2, "cpu", 0)
    try:
        cfg = env.cfg_task
        assert cfg.obs.history_length == 3 and cfg.control.kp == 27.0
        assert list(cfg.commands.lin_vel_y) == pytest.approx([-0.3, 0.3])
        assert not cfg.domain_rand.randomize_latency  # the nominal robot
        obs = env.get_observations()
        assert obs["policy_history"].shape == (2, 3 * 45)
    finally:
        env.close()


def test_metadata_actor_gives_the_checkpoints_torch_actions(rnn_history_run):
    """Same observations into the torch policy and into the ONNX actor built from the file's metadata alone:
    same actions over 30 steps, through a reset of env 0 at step 10 (recurrent state zeroed in both). The file
    carries the task's integral loop after the LSTM (the actor has the default base_lin_vel estimator), so the torch
    side is the policy inside its torch twin of that loop, its states (h, c, u) carried and reset the same way."""
    from rlcore_tasks.go2.command_integral import integral_from_interface

    run_dir, onnx = rnn_history_run
    info = load_run(str(run_dir))
    env = make_run_env(info, 3, "cpu", 1)
    try:
        policy = make_run_policy(info, env, "cpu")
        loop = integral_from_interface(policy, onnx_interface(str(onnx)))
        assert loop is not None and loop.input_names == ["obs", "h_in", "c_in", "u_in"]
        state = loop.initial_state(3)
        onnx_actor = OnnxActor.from_interface(str(onnx), onnx_interface(str(onnx)), 3)
        assert set(onnx_actor.state) == {"h_in", "c_in", "u_in"}
        assert set(onnx_actor.groups_1d) == {"policy", "policy_history"}
        obs = env.get_observations()
        moved = 0.0
        with torch.inference_mode():
            for step in range(30):
                flat = torch.cat([obs[g] for g in onnx_actor.groups_1d], dim=-1)
                a_torch, *state = loop(flat, *state)
                a_onnx = onnx_actor(obs)
                torch.testing.assert_close(a_onnx, a_torch, atol=1e-5, rtol=0)
                moved = max(moved, float(state[-1].abs().max()))
                obs, _, dones, _ = env.step(a_torch)
                if step == 10:
                    dones = dones.clone()
                    dones[0] = True
                for x in state:
                    x[:, dones.bool()] = 0.0
                onnx_actor.reset(dones)
        assert moved > 0  # u integrated something
    finally:
        env.close()


def test_bad_input_is_one_line(trained_run, tmp_path):
    with pytest.raises(Exception, match=r"pretrained=nope: no such policy; shipped: go2_flat"):
        play(play_args("pretrained=nope"))
    with pytest.raises(UserError, match=r"task=pendulum: .*go2_flat.onnx is a policy for task go2"):
        play(play_args("task=pendulum", "pretrained=go2_flat"))
    with pytest.raises(UserError, match=r"pretrained= is a policy of its own"):
        play(play_args("pretrained=go2_flat", f"checkpoint={trained_run['dir']}"))
    with pytest.raises(UserError, match=r"onnx=.*missing.onnx: no such file"):
        play(play_args(f"onnx={tmp_path / 'missing.onnx'}"))
    pendulum_onnx = trained_run["dir"] / "policy.onnx"
    assert pendulum_onnx.is_file()
    with pytest.raises(UserError, match=r"is a pendulum policy; an ONNX file alone replays policies of tasks whose interface rebuilds them \(go2, go2_rough\)"):
        play(play_args(f"onnx={pendulum_onnx}"))
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(UserError, match=r"cannot read it as an ONNX model"):
        play(play_args(f"onnx={junk}"))


def test_command_line_reports_a_missing_policy_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "rlcore.play", "episodes=1"], cwd=REPO_ROOT, env=cli_env(),
                          capture_output=True, text=True, timeout=120)
    assert_user_error(proc, "play needs checkpoint=", "pretrained=<name> (go2_flat, go2_flat_student)")


def test_robustness_takes_a_shipped_policy_by_name():
    """``python -m rlcore.robustness policy=go2_flat`` runs the shipped file: on the nominal robot the teacher tracks the
    probe commands (a standing policy scores ~0.5 m/s) without a fall."""
    from rlcore.robustness import evaluate, resolve_policy

    assert resolve_policy("go2_flat") == find_pretrained("go2_flat").path
    lines = []
    result = evaluate("go2_flat", variants=["nominal"], threads=1, table="none", out=lines.append)
    assert result["policy"] == find_pretrained("go2_flat").path
    assert result["nominal_err"] < 0.1 and result["falls"] == 0
    assert lines[-1].startswith("robustness: nominal_err=")
