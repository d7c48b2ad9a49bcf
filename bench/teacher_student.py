"""Teacher -> blind student -> ONNX -> robustness: the deployment pipeline of the Go2 task, end to end, timed.

Stages (each through the code path a user runs, called as functions; wall time of each is reported):

1. ``teacher``: ``rlcore.train.run`` of ``task=go2`` (PPO, default config, plus any ``--teacher-overrides``), stopped
   at ``--teacher-minutes`` of training or ``--teacher-iterations`` iterations, whichever comes first. Skipped
   with ``--teacher-run <run dir>``, which reuses an existing PPO run.
2. ``student``: ``rlcore.train.run`` of ``task=go2 algorithm=distillation model=rnn teacher=<teacher run>``: a
   recurrent student (LSTM by default; ``--student-overrides model.actor.rnn_type=gru`` for a GRU) that reads only
   the ``policy`` group imitates the teacher, stopped at ``--student-minutes`` / ``--student-iterations``.
3. ``export``: ``rlcore.export.export`` (the verified ``python -m rlcore.export ... format=onnx``) of both runs'
   last checkpoints into ``<out>/exported/teacher.onnx`` and ``student.onnx``.
4. ``closed_loop``: each ONNX file drives the run's own task through onnxruntime for ``--loop-steps`` (1000)
   control steps on ``--loop-envs`` envs (recurrent state fed back, zeroed for envs whose episode ended); the
   torch policy rebuilt from the checkpoint sees the same observations. ``onnx_max_action_diff`` is the largest
   ``|onnx - torch|`` action over both policies, all envs and steps.
5. ``robustness``: ``rlcore.robustness.evaluate`` (onnxruntime only, the interface read from the file) of both files
   on the whole variant grid x probe commands.

Walking criterion and ``teacher_min`` / ``student_min``: that of ``bench/time_to_walk.py``. Every
``--eval-every`` iterations the *deterministic* policy (the student for stage 2) runs ``--eval-envs`` separate envs
of the same task from fresh resets, 1 s to get going then 4 s measured; it walks when the mean planar tracking
error ``|v_xy_cmd - v_xy|`` is below ``--threshold`` (0.25 m/s). ``<stage>_min`` is the stage's wall time in
minutes, counted from the call of ``rlcore.train.run`` (env and model set-up included, evaluations excluded), at
the first evaluation that met the criterion; if none did, it is the minutes the stage trained in all (its budget),
and the line ``[teacher_student] <stage>: reached=no`` says so. Training does not stop at the criterion: the
budget is spent either way. With ``--teacher-run`` the teacher is not trained here and ``teacher_min`` is ``nan``.

Run (from the repository root)::

    python bench/teacher_student.py --seed 1                       # 20 + 15 minute budgets, full settings
    python bench/teacher_student.py --teacher-run logs/go2/<run> --student-minutes 10
    python bench/teacher_student.py --tiny --threads 1             # a smoke run of the whole pipeline (~15 s)

Everything lands in ``--out`` (default ``logs/teacher_student/<time>``): ``teacher/`` and ``student/`` run
directories, ``exported/``, and ``summary.json`` with every figure. Last line::

    teacher_student: teacher_err=<e> student_err=<e> student_worst_err=<e> student_falls=<n> onnx_max_action_diff=<d> teacher_min=<m> student_min=<m>

(``*_err``: robustness ``mean_err`` over the variants, ``student_worst_err`` its ``worst_err``, m/s.)
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

from _common import ROOT, WALK_RULE, evaluate, with_policy

#: Overrides of the ``--tiny`` smoke run: 8 envs x 8 steps, small networks, one MuJoCo thread.
TINY_TEACHER = ["task.num_envs=8", "runner.num_steps_per_env=8", "model.actor.hidden_dims=[32,32]",
                "model.critic.hidden_dims=[32,32]", "algorithm.num_mini_batches=2", "algorithm.num_learning_epochs=1"]
TINY_STUDENT = ["task.num_envs=8", "runner.num_steps_per_env=8", "model.actor.hidden_dims=[32,32]",
                "model.actor.rnn_hidden_dim=16"]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--teacher-minutes", type=float, default=20.0, help="teacher training budget [min]")
    p.add_argument("--teacher-iterations", type=int, default=None, help="teacher iteration budget")
    p.add_argument("--student-minutes", type=float, default=15.0, help="distillation budget [min]")
    p.add_argument("--student-iterations", type=int, default=None, help="distillation iteration budget")
    p.add_argument("--teacher-run", type=str, default=None, help="reuse this PPO run directory (no teacher training)")
    p.add_argument("--out", type=str, default=None, help="output directory (default: logs/teacher_student/<time>)")
    p.add_argument("--tiny", action="store_true", help="a few iterations on a few envs: checks the pipeline only")
    p.add_argument("--threshold", type=float, default=WALK_RULE["threshold"],
                   help="walking criterion: eval tracking error [m/s]")
    p.add_argument("--eval-every", type=int, default=WALK_RULE["eval_every"],
                   help="iterations between deterministic evaluations")
    p.add_argument("--eval-envs", type=int, default=WALK_RULE["eval_envs"], help="envs of the deterministic evaluation")
    p.add_argument("--loop-steps", type=int, default=1000, help="control steps of the ONNX-vs-torch closed loop")
    p.add_argument("--loop-envs", type=int, default=16, help="envs of the ONNX-vs-torch closed loop")
    p.add_argument("--settle-s", type=float, default=1.0, help="robustness: seconds before measuring")
    p.add_argument("--measure-s", type=float, default=5.0, help="robustness: seconds measured")
    p.add_argument("--threads", type=int, default=None, help="torch and MuJoCo threads (default: all cores)")
    p.add_argument("--teacher-overrides", nargs="*", default=[], help="Hydra overrides of the teacher run")
    p.add_argument("--student-overrides", nargs="*", default=[], help="Hydra overrides of the distillation run")
    args = p.parse_args(argv)
    if args.tiny:
        args.teacher_iterations = args.teacher_iterations or 3
        args.student_iterations = args.student_iterations or 3
        args.eval_every, args.eval_envs = min(args.eval_every, 3), min(args.eval_envs, 4)
        args.loop_envs = min(args.loop_envs, 2)
        args.settle_s, args.measure_s = min(args.settle_s, 0.2), min(args.measure_s, 0.4)
    for name in ("teacher_iterations", "student_iterations", "eval_every", "eval_envs", "loop_steps", "loop_envs",
                 "threads"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')}={value}: must be >= 1")
    if args.teacher_run and not os.path.isdir(args.teacher_run) and not os.path.isfile(args.teacher_run):
        p.error(f"--teacher-run {args.teacher_run}: no such run directory or checkpoint")
    return args


# ============================================================================ stages 1-2: training with a budget
def train_stage(name: str, overrides: list[str], log_dir: Path, minutes: float, args) -> dict:
    """Train through ``rlcore.train.run`` until the budget is spent; evaluate the walking criterion on the way.

    Returns ``minutes`` (training wall time, evaluations excluded), ``iterations``, ``reached`` (the criterion was
    met), ``reached_min`` (training minutes at the first evaluation that met it, else None), ``last_eval_err``.
    """
    from omegaconf import OmegaConf

    from rlcore.config.cli import compose
    from rlcore.env.task import make_task
    from rlcore.train import run

    cfg = compose(overrides)
    env_kwargs = OmegaConf.to_container(cfg.task.env, resolve=True) or {}
    eval_env = make_task(cfg.task.name, num_envs=args.eval_envs, device="cpu", seed=10_000 + args.seed, **env_kwargs)
    clock = {"start": None, "paused": 0.0}
    result = {"minutes": 0.0, "iterations": 0, "reached": False, "reached_min": None, "last_eval_err": float("nan")}

    def on_iteration(runner, it: int, stats: dict) -> bool:
        now = time.perf_counter()
        if clock["start"] is None:  # the first iteration: start counted from the run's set-up
            clock["start"] = t_setup
        wall = now - clock["start"] - clock["paused"]
        result.update(minutes=wall / 60, iterations=it + 1)
        eval_err = float("nan")
        if (it + 1) % args.eval_every == 0:
            t0 = time.perf_counter()
            eval_err = with_policy(runner, evaluate, eval_env, runner.env)
            clock["paused"] += time.perf_counter() - t0
            result["last_eval_err"] = eval_err
            if eval_err < args.threshold and not result["reached"]:
                result.update(reached=True, reached_min=wall / 60)
        print(f"[teacher_student] {name} it={it:4d} wall={wall:7.1f}s eval_error={eval_err:.3f} "
              f"collect={stats['collect_s']:.2f}s learn={stats['learn_s']:.2f}s", flush=True)
        return wall > minutes * 60

    t_setup = time.perf_counter()
    try:
        run(cfg, log_dir=str(log_dir), callback=on_iteration)
    finally:
        eval_env.close()
    return result


def stage_overrides(args, base: list[str], tiny: list[str], extra: list[str], iterations: int | None) -> list[str]:
    """Hydra overrides of a training stage: the stage's own, the budget, threads, then the user's."""
    out = [*base, f"seed={args.seed}", "logger=none", "runner.log_interval=1000000",
           f"runner.max_iterations={iterations or 1_000_000}", *(tiny if args.tiny else [])]
    if args.threads:
        out.append(f"threads={args.threads}")
        if not any(o.lstrip("+").startswith("task.env.sim.threads=") for o in extra):
            out.append(f"+task.env.sim.threads={args.threads}")
    mine = {o.split("=", 1)[0].lstrip("+") for o in extra}
    out = [o for o in out if o.split("=", 1)[0].lstrip("+") not in mine]  # the user's value wins
    return out + list(extra)


# ============================================================================ stage 3: export
def export_stage(run_dir: str, output: Path, args) -> dict:
    """``python -m rlcore.export checkpoint=<run_dir> format=onnx output=<output>`` as a function."""
    from rlcore.config.cli import parse_key_values
    from rlcore.config.schema import ExportCfg
    from rlcore.export import export

    keys = [f"checkpoint={run_dir}", "format=onnx", f"output={output}", "num_envs=2", "verify_steps=16",
            f"seed={args.seed}"]
    if args.threads:
        keys.append(f"threads={args.threads}")
    return export(parse_key_values(keys, ExportCfg, "export"))


# ============================================================================ stage 4: ONNX vs torch, closed loop
def closed_loop_diff(run_dir: str, onnx_path: str, steps: int, num_envs: int, seed: int) -> float:
    """Max ``|onnx - torch|`` action while the ONNX file drives the run's task for ``steps`` control steps.

    The file is fed as a deployment would feed it (observation groups and recurrent state names from its
    metadata; state carried from its outputs and zeroed where an episode ended); the torch policy rebuilt from the
    checkpoint sees the same observations and resets the same envs.
    """
    import numpy as np
    import onnxruntime as ort
    import torch

    from rlcore.checkpoint.run_files import load_run, make_run_env, make_run_policy
    from rlcore.deployment import read_onnx_interface
    from rlcore_tasks.go2.command_integral import integral_from_interface

    meta = read_onnx_interface(onnx_path)
    info = load_run(run_dir)
    env = make_run_env(info, num_envs, "cpu", seed)
    policy = make_run_policy(info, env, "cpu")
    loop = integral_from_interface(policy, meta)  # a file with an integral loop: its torch twin is the reference
    loop_state = loop.initial_state(num_envs) if loop is not None else ()
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    output_names = [o.name for o in session.get_outputs()]
    state = {s["input"]: np.zeros((s["shape"][0], num_envs, s["shape"][2]), dtype=np.float32)
             for s in meta["recurrent_state"]}
    groups = list(meta["obs_groups"])
    worst = 0.0
    try:
        obs = env.get_observations()
        policy.reset()
        with torch.inference_mode():
            for _ in range(steps):
                flat = torch.cat([obs[g] for g in groups], dim=-1).float().numpy()
                outputs = dict(zip(output_names, session.run(None, {"obs": flat, **state})))
                if loop is None:
                    eager = policy(obs, stochastic_output=False).numpy()
                else:
                    eager, *loop_state = loop(torch.from_numpy(flat), *loop_state)
                    eager = eager.numpy()
                worst = max(worst, float(np.abs(outputs["actions"] - eager).max()))
                obs, _, dones, _ = env.step(torch.from_numpy(outputs["actions"]))
                done = dones.numpy().astype(bool)
                for s in meta["recurrent_state"]:
                    state[s["input"]] = outputs[s["output"]]
                    state[s["input"]][:, done] = 0.0
                for x in loop_state:
                    x[:, torch.from_numpy(done)] = 0.0
                policy.reset(dones)
    finally:
        env.close()
    return worst


# ============================================================================ the pipeline
def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    import torch

    from rlcore.robustness import evaluate as robustness

    if args.threads:
        torch.set_num_threads(args.threads)
    out = Path(args.out or ROOT / "logs" / "teacher_student" / time.strftime("%Y-%m-%d_%H-%M-%S")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"[teacher_student] out={out} seed={args.seed} tiny={args.tiny} torch_threads={torch.get_num_threads()}",
          flush=True)
    walls: dict[str, float] = {}
    summary: dict = {"args": vars(args), "out": str(out)}

    t0 = time.perf_counter()
    if args.teacher_run:
        teacher_dir = os.path.abspath(args.teacher_run)
        teacher = {"minutes": float("nan"), "reached": None, "reached_min": None, "iterations": None}
        print(f"[teacher_student] teacher: reusing {teacher_dir}", flush=True)
    else:
        teacher_dir = str(out / "teacher")
        overrides = stage_overrides(args, ["task=go2"], TINY_TEACHER, args.teacher_overrides, args.teacher_iterations)
        print(f"[teacher_student] teacher: python -m rlcore.train {' '.join(overrides)}", flush=True)
        teacher = train_stage("teacher", overrides, Path(teacher_dir), args.teacher_minutes, args)
    walls["teacher_train"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    student_dir = str(out / "student")
    overrides = stage_overrides(args, ["task=go2", "algorithm=distillation", "model=rnn", f"teacher={teacher_dir}"],
                                TINY_STUDENT, args.student_overrides, args.student_iterations)
    print(f"[teacher_student] student: python -m rlcore.train {' '.join(overrides)}", flush=True)
    student = train_stage("student", overrides, Path(student_dir), args.student_minutes, args)
    walls["student_train"] = time.perf_counter() - t0

    onnx, loop_diff, robust = {}, {}, {}
    for name, run_dir in (("teacher", teacher_dir), ("student", student_dir)):
        t0 = time.perf_counter()
        onnx[name] = export_stage(run_dir, out / "exported" / f"{name}.onnx", args)["path"]
        walls[f"{name}_export"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        loop_diff[name] = closed_loop_diff(run_dir, onnx[name], args.loop_steps, args.loop_envs, args.seed)
        walls[f"{name}_closed_loop"] = time.perf_counter() - t0
        print(f"[teacher_student] {name}: onnx vs torch over {args.loop_steps} closed-loop steps x {args.loop_envs} "
              f"envs: max |action diff| = {loop_diff[name]:.2e}", flush=True)
    for name in ("teacher", "student"):
        t0 = time.perf_counter()
        r = robustness(onnx[name], settle_s=args.settle_s, measure_s=args.measure_s, threads=args.threads,
                       table="summary")
        robust[name] = {k: r[k] for k in ("nominal_err", "mean_err", "worst_err", "worst_variant", "falls",
                                          "unstable", "cases_n", "nominal_err_yaw", "mean_err_yaw", "worst_err_yaw")}
        robust[name]["not_followed"] = [f"{c['variant']}/{c['command']}: {c['not_followed']}" for c in r["not_followed"]]
        robust[name]["variants"] = {v: {k: x for k, x in d.items() if k != "changes"} for v, d in r["variants"].items()}
        walls[f"{name}_robustness"] = time.perf_counter() - t0

    def minutes_to_walk(stage: dict) -> float:
        return stage["reached_min"] if stage["reached"] else stage["minutes"]

    teacher_min, student_min = minutes_to_walk(teacher), minutes_to_walk(student)
    summary.update(teacher=teacher, student=student, onnx=onnx, onnx_action_diff=loop_diff, robustness=robust,
                   wall_s=walls, teacher_min=teacher_min, student_min=student_min)
    with open(out / "summary.json", "w") as f:
        json.dump(summary, f, indent=2, default=str)
        f.write("\n")
    for name, stage in (("teacher", teacher), ("student", student)):
        trained = (f"reused {teacher_dir}" if stage["reached"] is None else
                   f"reached={'yes' if stage['reached'] else 'no'} trained {stage['minutes']:.2f} min, "
                   f"{stage['iterations']} iterations")
        print(f"[teacher_student] {name}: {trained}; robustness nominal_err={robust[name]['nominal_err']:.3f} "
              f"mean_err={robust[name]['mean_err']:.3f} worst_err={robust[name]['worst_err']:.3f} "
              f"({robust[name]['worst_variant']}) falls={robust[name]['falls']}/{robust[name]['cases_n']} "
              f"mean_err_yaw={robust[name]['mean_err_yaw']:.3f} "
              f"not_followed={len(robust[name]['not_followed'])}/{robust[name]['cases_n']}")
    print("[teacher_student] wall time per stage: " + ", ".join(f"{k}={v:.1f}s" for k, v in walls.items()))
    print(f"[teacher_student] summary: {out / 'summary.json'}")
    print(f"teacher_student: teacher_err={robust['teacher']['mean_err']:.3f} "
          f"student_err={robust['student']['mean_err']:.3f} student_worst_err={robust['student']['worst_err']:.3f} "
          f"student_falls={robust['student']['falls']} onnx_max_action_diff={max(loop_diff.values()):.2e} "
          f"teacher_min={teacher_min:.2f} student_min={student_min:.2f}")
    return summary


if __name__ == "__main__":
    main()
