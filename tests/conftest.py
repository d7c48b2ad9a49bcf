"""Small fixtures shared by the test suite, and its tiers (``tests/_tiers.py``, loaded below).

Tiers: ``@pytest.mark.slow`` marks a test that trains a policy, starts processes or otherwise takes over 2 s;
``@pytest.mark.learning`` one that trains a policy to a threshold (every ``learning`` test is ``slow`` as well).
``python -m pytest -m "not slow"`` is the quick inner loop; CI runs everything. A test without either marker whose
setup + call use over 2 s of CPU time is listed at the end of the run ("unmarked tests over 2 s of CPU time"), and
passes all the same: a busy machine never fails a run. The environment variable ``RLCORE_UNMARKED_LIMIT_S`` sets
another limit in seconds. A module- or session-scoped fixture that trains counts against the first test using it:
its users are ``slow``.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time

import pytest
import torch
from tensordict import TensorDict

# MuJoCo picks its GL backend when it is first imported, whichever test does that (a gymnasium MuJoCo env, the
# viewer): importing the Go2 package first applies its default (EGL without a display), so the rendering tests
# see the same backend as their skip probe.
import rlcore_tasks.go2  # noqa: F401

pytest_plugins = ["_tiers"]  # tests/_tiers.py: the slow / learning tiers and the unmarked-test CPU-time report


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    """Tests share a small CPU with other work: one torch thread for the whole session, set before any
    fixture trains anything, keeps them fast under contention and their results deterministic."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


#: A one-iteration ``task=go2`` run with tiny networks (the default actor: history and a base_lin_vel estimator).
TINY_GO2 = ["task=go2", "task.num_envs=8", "runner.num_steps_per_env=8", "runner.max_iterations=1", "logger=none",
            "model.actor.hidden_dims=[32,32]", "model.critic.hidden_dims=[32,32]", "algorithm.num_mini_batches=2",
            "algorithm.num_learning_epochs=1", "+task.env.sim.threads=1", "seed=3"]


@pytest.fixture(scope="session")
def tiny_go2_run(tmp_path_factory) -> str:
    """The directory of a :data:`TINY_GO2` run (checkpoint, config, policy.onnx), trained once per session."""
    from rlcore.config.cli import compose
    from rlcore.train import run

    run_dir = tmp_path_factory.mktemp("tiny_go2")
    run(compose(TINY_GO2), log_dir=str(run_dir))
    return str(run_dir)


# Per-env shapes of the observation groups used by the model tests.
OBS_SHAPES: dict[str, tuple[int, ...]] = {
    "policy": (7,),
    "privileged": (3,),
    "height_scan": (1, 9, 11),
    "camera": (2, 8, 8),
}


def build_obs(
    num_envs: int = 4,
    lead: tuple[int, ...] = (),
    shapes: dict[str, tuple[int, ...]] | None = None,
    dtype: torch.dtype = torch.float32,
) -> TensorDict:
    """Random observations ``TensorDict[*lead, num_envs]`` with the groups of ``shapes`` (default ``OBS_SHAPES``)."""
    shapes = OBS_SHAPES if shapes is None else shapes
    batch = (*lead, num_envs)
    return TensorDict({k: torch.randn(*batch, *s, dtype=dtype) for k, s in shapes.items()}, batch_size=list(batch))


@pytest.fixture
def seed() -> int:
    """Seed torch's global RNG so that every test is deterministic."""
    torch.manual_seed(0)
    return 0


@pytest.fixture
def make_obs(seed):
    """Factory ``make_obs(num_envs=4, lead=(), shapes=None, dtype=float32) -> TensorDict`` (seeded)."""
    return build_obs


@pytest.fixture(scope="session")
def xvfb():
    """A virtual X display (``Xvfb -displayfd``); skipped when none can be started."""
    for tool in ("Xvfb", "xdotool", "xwd"):
        if shutil.which(tool) is None:
            pytest.skip(f"no display server can be driven here: {tool} is not installed "
                        "(apt-get install -y xvfb xdotool x11-apps)")
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(["Xvfb", "-displayfd", str(write_fd), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                              pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    os.close(write_fd)
    number = b""
    while not number.endswith(b"\n") and select.select([read_fd], [], [], 20)[0]:  # "<n>\n", maybe in two writes
        chunk = os.read(read_fd, 16)
        if not chunk:
            break
        number += chunk
    number = number.decode().strip()
    display = f":{number}"
    for _ in range(50 if number else 0):  # until a client can connect
        probe = subprocess.run(["xdotool", "getdisplaygeometry"], env={**os.environ, "DISPLAY": display},
                               capture_output=True, timeout=10)
        if probe.returncode == 0:
            break
        time.sleep(0.2)
    else:
        server.kill()
        os.close(read_fd)
        pytest.skip(f"Xvfb did not start: {server.communicate(timeout=5)[1].decode()[-300:]}")
    yield display
    os.close(read_fd)
    server.terminate()
    server.wait(timeout=10)
