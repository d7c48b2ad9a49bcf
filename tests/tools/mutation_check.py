"""Mutation check: plant one one-line bug at a time in a copy of rlcore and run the fast tests of its area.

A test suite that passes with a bug in place cannot catch that bug. This script copies ``rlcore/``, ``rlcore_tasks/``,
``tests/``, ``conf/``, ``pyproject.toml`` and ``README.md`` into a temporary directory, and for each mutation
below replaces one snippet in one file of the copy, runs ``pytest -x -m "not learning"`` on the listed test files
(with ``PYTHONPATH`` and the working directory pointing at the copy, so the copy is what gets imported, not the
editable install), restores the file, and reports whether a test failed ("caught", with the first failing test)
or not ("missed"). A snippet that no longer occurs exactly once is reported "stale": update the entry.

Not collected by pytest (the file name does not start with ``test_``). Run from the repository root::

    python tests/tools/mutation_check.py                 # every mutation (a few minutes on one core)
    python tests/tools/mutation_check.py --only entropy  # the mutations whose name contains "entropy"
    python tests/tools/mutation_check.py --list          # names, files and target tests only

To extend it, add a ``Mutation`` to ``MUTATIONS``: a name, the file, a snippet that occurs exactly once in it,
its replacement, and the fast test files (optionally a ``-k`` expression) of the area that should catch it.
Exit status: 0 when every mutation is caught, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
COPIED = ("rlcore", "rlcore_tasks", "tests", "conf", "pyproject.toml", "README.md")
TIMEOUT_S = 600

PPO = "rlcore/algorithms/ppo.py"
PPO_UPDATE = "tests/algorithms/test_ppo_update.py"
PPO_TESTS = "tests/algorithms/test_ppo.py"
RND = "rlcore/extensions/rnd.py"
SYMMETRY = "rlcore/extensions/symmetry.py"
EXTENSIONS = "rlcore/extensions/__init__.py"
RND_IN_PPO = "tests/extensions/test_rnd_in_ppo.py"
SYM_IN_PPO = "tests/extensions/test_symmetry_in_ppo.py"
ESTIMATOR_MODEL = "rlcore/models/mlp_model.py"
ESTIMATOR_TESTS = "tests/algorithms/test_estimator.py"


@dataclass(frozen=True)
class Mutation:
    """Replace ``original`` (which must occur exactly once in ``file``) by ``replacement``; ``tests`` should fail."""

    name: str
    file: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    k: str | None = None


MUTATIONS: list[Mutation] = [
    # ---- the PPO loss
    Mutation("entropy sign flipped", PPO,
             "value_loss - self.entropy_coef * entropy.mean()", "value_loss + self.entropy_coef * entropy.mean()",
             (PPO_UPDATE,)),
    Mutation("-surrogate (policy trained the wrong way)", PPO,
             "loss = surrogate_loss + self.value_loss_coef", "loss = -surrogate_loss + self.value_loss_coef",
             (PPO_UPDATE,)),
    Mutation("value loss coefficient ignored", PPO,
             "self.value_loss_coef * value_loss", "value_loss", (PPO_UPDATE,)),
    Mutation("ratio clip removed", PPO,
             "-adv * ratio.clamp(1.0 - self.clip_param, 1.0 + self.clip_param)", "-adv * ratio", (PPO_UPDATE,)),
    Mutation("value clip removed", PPO,
             "(values - old_values).clamp(-self.clip_param, self.clip_param)", "(values - old_values)",
             (PPO_UPDATE,)),
    Mutation("old log-prob replaced by the current one (ratio always 1)", PPO,
             "ratio = torch.exp(log_prob - old_log_prob)", "ratio = torch.exp(log_prob - log_prob.detach())",
             (PPO_UPDATE,)),
    Mutation("per-mini-batch advantage normalisation skipped", PPO,
             "advantages=_normalize(batch.advantages)", "advantages=batch.advantages", (PPO_UPDATE,)),
    # ---- the step
    Mutation("gradient clipping removed (per model)", PPO,
             "clip_grad_norm_per_model(self._clip_groups(), self.max_grad_norm)", "pass", (PPO_UPDATE,)),
    Mutation("gradient clipping removed (joint)", PPO,
             "nn.utils.clip_grad_norm_(self._params(), self.max_grad_norm)", "pass", (PPO_UPDATE,)),
    Mutation("joint clip used by default instead of per-model", PPO,
             "if self.clip_gradients_jointly:", "if True:", (PPO_UPDATE,)),
    Mutation("gradients accumulate across mini-batches (no zero_grad)", PPO,
             "self.optimizer.zero_grad(set_to_none=True)", "pass", (PPO_UPDATE,)),
    Mutation("adaptive learning rate direction reversed", PPO,
             "self.learning_rate = max(LR_MIN, self.learning_rate / 1.5)",
             "self.learning_rate = max(LR_MIN, self.learning_rate * 1.5)", (PPO_UPDATE,)),
    Mutation("KL direction swapped (new || old)", PPO,
             "self.actor.get_kl_divergence(old_params, new_params)",
             "self.actor.get_kl_divergence(new_params, old_params)", (PPO_TESTS,), k="kl"),
    # ---- returns and storage of the rollout
    Mutation("GAE lambda dropped", PPO,
             "advantage = delta + self.gamma * self.lam * not_done * advantage",
             "advantage = delta + self.gamma * not_done * advantage", (PPO_TESTS,), k="gae"),
    Mutation("time-out bootstrap dropped", PPO,
             "rewards = rewards + self.gamma * torch.where(time_outs, bootstrap, 0.0)", "rewards = rewards",
             (PPO_TESTS,), k="time_out"),
    Mutation("observation normaliser updated during the mini-batches", PPO,
             "num_updates += 1", "num_updates += 1; self.update_normalization(batch.observations)",
             (PPO_TESTS,), k="normalizer"),
    # ---- extensions inside PPO
    Mutation("RND bonus never reaches the reward", PPO,
             "rewards = rewards + self.intrinsic_rewards", "rewards = rewards", (RND_IN_PPO,)),
    Mutation("RND bonus without step_dt", "rlcore/extensions/rnd.py",
             "(self.weight * self.step_dt) * error", "self.weight * error", (RND_IN_PPO,)),
    Mutation("RND predictor never trained by PPO", RND,
             "self.train_step(batch.observations, multi_gpu=sync, masks=batch.masks)",
             "0.0 * self.compute_loss(batch.observations, masks=batch.masks).item()", (RND_IN_PPO,)),
    Mutation("RND normaliser not updated by PPO", PPO,
             "ext.update_normalization(obs, sync=sync)", "pass", (RND_IN_PPO,)),
    Mutation("mirror loss dropped from the loss (still logged)", SYMMETRY,
             "return self.mirror_loss_coeff * mirror_loss,", "return 0.0 * mirror_loss,", (SYM_IN_PPO,)),
    Mutation("mirror loss coefficient ignored", SYMMETRY,
             "self.mirror_loss_coeff * mirror_loss,", "mirror_loss,", (SYM_IN_PPO,)),
    Mutation("symmetry augmentation labels not mirrored", SYMMETRY,
             "batch.observations, batch.actions = self.augment(batch.observations, batch.actions)",
             "batch.observations, batch.actions = self.augment(batch.observations, batch.actions)[0], "
             "batch.actions.repeat(2, 1)", (SYM_IN_PPO,)),
    Mutation("KL taken on the augmented block", PPO,
             "new_params = tuple(p[:n_orig] for p in dist_params)",
             "new_params = dist_params; "
             "old_params = tuple(p.repeat(aug.actions.shape[0] // n_orig, 1) for p in old_params)", (SYM_IN_PPO,)),
    # ---- runner and distributed
    Mutation("clip_actions ignored by the runner", "rlcore/runners/on_policy_runner.py",
             "return actions.clamp(-float(clip), float(clip))", "return actions",
             ("tests/runners/test_clip_actions.py",)),
    Mutation("normaliser warm-up steps the env with unclipped actions", "rlcore/runners/on_policy_runner.py",
             "actions = self._clip_actions(policy(obs, stochastic_output=True))",
             "actions = policy(obs, stochastic_output=True)", ("tests/runners/test_clip_actions.py",)),
    Mutation("distillation steps on the window's mean loss instead of its sum", "rlcore/algorithms/distillation.py",
             "self._step(window_loss)\n                        window_loss, window_len = 0.0, 0",
             "self._step(window_loss / window_len)\n                        window_loss, window_len = 0.0, 0",
             ("tests/algorithms/test_distillation.py",), k="last_partial_window"),
    Mutation("distributed advantage normalisation uses each rank's own statistics", PPO,
             "if is_distributed():", "if False:", ("tests/distributed/test_multiprocess.py",)),
    # ---- the mended end-to-end tests of issue 12 (each must be able to fail)
    Mutation("-surrogate, seen by the pendulum factory iteration", PPO,
             "loss = surrogate_loss + self.value_loss_coef", "loss = -surrogate_loss + self.value_loss_coef",
             (PPO_TESTS,), k="pendulum_iteration"),
    Mutation("-surrogate, seen by the legged_gym adapter's runner test", PPO,
             "loss = surrogate_loss + self.value_loss_coef", "loss = -surrogate_loss + self.value_loss_coef",
             ("tests/env/test_legged_gym_adapter.py",), k="privileged_critic"),
    Mutation("-surrogate, seen by the Gymnasium adapter's runner test", PPO,
             "loss = surrogate_loss + self.value_loss_coef", "loss = -surrogate_loss + self.value_loss_coef",
             ("tests/env/test_gymnasium_adapter.py",), k="half_cheetah"),
    Mutation("RND bonus never reaches the reward, seen by the CLI extension test", PPO,
             "rewards = rewards + self.intrinsic_rewards", "rewards = rewards",
             ("tests/cli/test_cli_commands.py",), k="rnd_and_symmetry"),
    Mutation("symmetry extension disconnected, seen by the CLI extension test", EXTENSIONS,
             '"symmetry_cfg": Symmetry,', "", ("tests/cli/test_cli_commands.py",), k="rnd_and_symmetry"),
    Mutation("symmetry extension disconnected, seen by the Go2 CLI test", EXTENSIONS,
             '"symmetry_cfg": Symmetry,', "",
             ("tests/cli/test_cli_go2.py",), k="symmetry_extension"),
    Mutation("observation statistics not merged across ranks, seen by the torchrun CLI test", PPO,
             "sync = self.is_multi_gpu", "sync = False", ("tests/cli/test_cli_distributed.py",)),
    Mutation("classic tasks render a fixed pose", "rlcore_tasks/classic/base.py",
             "s = self.state[0].detach().float().cpu().tolist()", "s = [0.0] * self.state.shape[1]",
             ("tests/cli/test_cli_video.py",), k="render"),
    # ---- the state estimator
    Mutation("estimate enters the head with its gradient (policy loss trains the estimator)", ESTIMATOR_MODEL,
             "self.mlp(torch.cat([latent, self.last_estimate.detach()], dim=-1))",
             "self.mlp(torch.cat([latent, self.last_estimate], dim=-1))", (ESTIMATOR_TESTS,)),
    Mutation("estimator loss weight ignored", "rlcore/extensions/estimator.py",
             "return model.estimator.loss_coef * mse,", "return mse,", (ESTIMATOR_TESTS,)),
    Mutation("estimator clipped together with the policy", PPO,
             "if not estimators:", "if True:", (ESTIMATOR_TESTS,)),
    Mutation("estimator loss never attached by PPO", PPO,
             'if getattr(getattr(self, part), "estimator", None) is not None]', "if False]", (ESTIMATOR_TESTS,)),
    Mutation("'elu' resolves to SELU, seen by the MLP forward check", "rlcore/modules/activation.py",
             '"elu": nn.ELU,', '"elu": nn.SELU,', ("tests/modules/test_mlp.py",), k="output_shape_and_dtype"),
]


def copy_repo(dest: Path) -> None:
    """Copy what the tests need into ``dest`` (no byte-code caches: a stale .pyc could hide a mutation)."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
    for name in COPIED:
        src = REPO_ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore)
        elif src.exists():
            shutil.copy2(src, dest / name)


def child_env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env.update(PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", OMP_WAIT_POLICY="PASSIVE")
    return env


def check_imports_from(root: Path) -> None:
    """Abort unless ``rlcore`` and ``rlcore_tasks`` resolve to the copy (not to the editable install)."""
    code = "import rlcore, rlcore_tasks; print(rlcore.__file__); print(rlcore_tasks.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=child_env(root), capture_output=True,
                         text=True, check=True).stdout.split()
    if not all(Path(p).resolve().is_relative_to(root.resolve()) for p in out):
        sys.exit(f"error: the copy at {root} is not what gets imported ({out}); the mutations would not apply.")


def run_tests(root: Path, tests: tuple[str, ...], k: str | None) -> tuple[int, str | None, float]:
    """``pytest -x`` on ``tests`` in the copy: (exit status, first failing test id or None, seconds)."""
    cmd = [sys.executable, "-m", "pytest", "-o", "addopts=", "-q", "-x", "-rfE", "-p", "no:cacheprovider",
           "-m", "not learning", *tests]
    if k:
        cmd += ["-k", k]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, env=child_env(root), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return -1, "(timed out)", time.perf_counter() - start
    match = re.search(r"^(?:FAILED|ERROR) (\S+)", proc.stdout, re.MULTILINE)
    return proc.returncode, match.group(1) if match else None, time.perf_counter() - start


def apply(root: Path, m: Mutation) -> str | None:
    """Write the mutation into the copy; returns the original text, or None when the snippet is stale."""
    path = root / m.file
    text = path.read_text()
    if text.count(m.original) != 1:
        return None
    path.write_text(text.replace(m.original, m.replacement))
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", nargs="*", default=None, help="run the mutations whose name contains any of these")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--no-baseline", action="store_true", help="skip the unmutated run of each test selection")
    args = parser.parse_args(argv)
    selected = [m for m in MUTATIONS if not args.only or any(s.lower() in m.name.lower() for s in args.only)]
    if args.list:
        for m in selected:
            print(f"{m.name:62s} {m.file:40s} {' '.join(m.tests)}{f' -k {m.k}' if m.k else ''}")
        return 0

    with tempfile.TemporaryDirectory(prefix="rlcore-mutants-") as tmp:
        root = Path(tmp)
        copy_repo(root)
        check_imports_from(root)
        if not args.no_baseline:  # a selection that fails unmutated would "catch" everything
            for tests, k in dict.fromkeys((m.tests, m.k) for m in selected):
                status, first, seconds = run_tests(root, tests, k)
                print(f"baseline {' '.join(tests)}{f' -k {k}' if k else ''}: exit {status} ({seconds:.0f} s)")
                if status != 0:
                    sys.exit(f"error: the unmutated tests fail ({first}); fix them before checking mutations.")
        rows = []
        for m in selected:
            original = apply(root, m)
            if original is None:
                rows.append((m, "stale", "snippet not found exactly once", 0.0))
                continue
            try:
                status, first, seconds = run_tests(root, m.tests, m.k)
            finally:
                (root / m.file).write_text(original)
            result = "missed" if status == 0 else "no tests" if status == 5 else "caught"
            rows.append((m, result, first or "-", seconds))
            print(f"{result:8s} {m.name} -> {first or '-'} ({seconds:.0f} s)", flush=True)

    print("\n| mutation | file | result | first failing test |\n|---|---|---|---|")
    for m, result, first, _ in rows:
        print(f"| {m.name} | {m.file} | {result} | {first} |")
    counts = {r: sum(1 for _, res, _, _ in rows if res == r) for r in ("caught", "missed", "stale", "no tests")}
    print(f"\n{len(rows)} mutations: " + ", ".join(f"{n} {r}" for r, n in counts.items() if n or r == "caught"))
    return 0 if counts["caught"] == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
