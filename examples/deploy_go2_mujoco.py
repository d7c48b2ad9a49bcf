"""Run an rlcore Go2 policy from its ONNX file alone: numpy, onnxruntime and mujoco, no rlcore.

Everything comes from the file's metadata (interface version 2, docs/deployment.md): joint order, default pose,
gains, action law, timing, solver, spawn state, how each observation term is computed, the history's frame order
and the recurrent state's initial values and reset rule. This is the file a team adapts to its robot's SDK: replace
``Robot`` (MuJoCo state in, joint torques out) with the robot's own, keep ``Observer`` and ``Policy``.

    python examples/deploy_go2_mujoco.py policy.onnx scene.xml --commands "0:0,0,0 1:0.8,0,0 4:0,0,1 7:0.5,0,-1"
    python examples/deploy_go2_mujoco.py policy.onnx scene.xml --teleop   # arrows: vx/vy, Q/E: yaw, space: stop

``scene.xml``: a MuJoCo Go2 with a floor, joints named as the file's ``joint_names``, a free joint at the base
(rlcore's own: ``rlcore_tasks/go2/assets/scene.xml``). Its actuators are disabled: the PD law of the file is
applied here as joint torques at every physics step.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import mujoco
import numpy as np
import onnxruntime as ort

F32 = np.float32


def read_interface(path: str) -> dict:
    """The ``rlcore.*`` metadata of an ONNX file, decoded; only interface version 2 is understood."""
    props = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).get_modelmeta().custom_metadata_map
    meta = {k[len("rlcore."):]: json.loads(v) for k, v in props.items() if k.startswith("rlcore.")}
    if meta.get("interface_version") != 2:
        raise SystemExit(f"{path}: interface_version {meta.get('interface_version')}; this deployer reads version 2 "
                         "(re-export the policy with python -m rlcore.export).")
    return meta


class Policy:
    """The graph and its recurrent state: each state starts at its ``initial`` value and is set back to it at an
    episode start (``reset: episode_start``); otherwise each step's output is the next step's input."""

    def __init__(self, path: str, meta: dict) -> None:
        self.session, self.states = ort.InferenceSession(path, providers=["CPUExecutionProvider"]), meta["recurrent_state"]
        self.reset()

    def reset(self) -> None:
        self.state = {s["input"]: np.full([1 if d == "batch" else d for d in s["shape"]], s["initial"], np.float32)
                      for s in self.states}

    def __call__(self, obs: np.ndarray) -> np.ndarray:
        names = [o.name for o in self.session.get_outputs()]
        out = dict(zip(names, self.session.run(None, {"obs": obs[None].astype(np.float32), **self.state})))
        self.state = {s["input"]: out[s["output"]] for s in self.states}
        return out["actions"][0]


class Observer:
    """Builds the ``obs`` input: the groups of ``obs_groups`` in order, each term ``(quantity - offset) * scale``,
    each group clipped to +-clip; a history group holds past frames of its source group at ``lags`` steps, newest
    first, frames from before the episode's first step being that step's. Training perturbations are not applied.
    The arithmetic is float32, as in training (float64 drifts from it by about 1e-7 a step)."""

    def __init__(self, meta: dict) -> None:
        self.groups = [(name, meta["observation_groups"][name]) for name in meta["obs_groups"]]
        self.reset()

    def reset(self) -> None:
        self.past: dict[str, list[np.ndarray]] = {}  # each history source's last max(lags) frames, oldest first

    def __call__(self, quantities: dict[str, np.ndarray]) -> np.ndarray:
        frames, parts, depth = {}, [], {}
        for name, group in self.groups:
            if "history_of" in group:
                continue
            value = [(np.asarray(quantities[t["name"]], F32) - np.asarray(t.get("offset", 0.0), F32))
                     * np.asarray(t["scale"], F32) for t in group["terms"]]
            clip = group["clip"] if group["clip"] is not None else np.inf
            frames[name] = np.clip(np.concatenate(value), -clip, clip).astype(F32)
        for name, group in self.groups:
            source = group.get("history_of")
            if source is None:
                parts.append(frames[name])
                continue
            assert group["order"] == "newest_first" and group["before_episode_start"] == "first_frame", group["order"]
            past = self.past.get(source) or [frames[source]]
            parts += [past[max(len(past) - lag, 0)] for lag in group["lags"]]
            depth[source] = max(depth.get(source, 0), *group["lags"])
        for name, keep in depth.items():  # a ring: older frames are never read, so memory stays flat in long runs
            self.past[name] = (self.past.get(name, []) + [frames[name]])[-keep:]
        return np.concatenate(parts)


class Robot:
    """A MuJoCo Go2 run as the file says: its timestep and solver, its spawn state, its PD law as joint torques."""

    def __init__(self, scene: str, meta: dict) -> None:
        self.model = mujoco.MjModel.from_xml_path(scene)
        self.data, self.meta = mujoco.MjData(self.model), meta
        opt, solver = self.model.opt, meta["solver"]
        opt.timestep, opt.iterations, opt.ls_iterations = meta["physics_dt"], solver["iterations"], solver["ls_iterations"]
        opt.integrator = getattr(mujoco.mjtIntegrator, solver["integrator"])
        opt.cone, opt.impratio = getattr(mujoco.mjtCone, solver["cone"]), solver["impratio"]
        opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION  # torques below are the only actuation
        joints = [self.model.joint(n) for n in meta["joint_names"]]
        self.qadr, self.dadr = [int(j.qposadr[0]) for j in joints], [int(j.dofadr[0]) for j in joints]
        self.default = np.array(meta["default_joint_pos"])
        self.kp, self.kd, self.limit = (np.array(meta[k]) for k in ("kp", "kd", "torque_limits"))
        self.actions = np.zeros(len(joints), F32)

    def spawn(self) -> None:
        """The episode's first state (``spawn``): base upright at its height, joints at the default pose, at rest."""
        s, d = self.meta["spawn"], self.data
        mujoco.mj_resetData(self.model, d)
        d.qpos[:3], d.qpos[3:7] = [0.0, 0.0, s["base_height"]], s["base_quat_wxyz"]
        d.qpos[self.qadr] = self.default if s["joint_pos"] == "default_joint_pos" else s["joint_pos"]
        d.qvel[:] = 0.0
        self.actions = np.full(len(self.qadr), s["previous_actions"], F32)
        mujoco.mj_forward(self.model, d)

    def quantities(self, command: np.ndarray) -> dict[str, np.ndarray]:
        """What each observation term measures (units as the file states), by term name."""
        d, gravity = self.data, np.array([0.0, 0.0, -1.0], F32)
        w, xyz = d.qpos[3].astype(F32), d.qpos[4:7].astype(F32)
        twice = 2.0 * np.cross(xyz, gravity)  # gravity rotated into the base frame by the inverse quaternion
        return {"base_ang_vel": d.qvel[3:6].copy(), "projected_gravity": gravity - w * twice + np.cross(xyz, twice),
                "velocity_commands": command, "joint_pos": d.qpos[self.qadr], "joint_vel": d.qvel[self.dadr],
                "last_actions": self.actions}

    def apply(self, actions: np.ndarray) -> None:
        """``action_law`` (joint_position_pd): hold the target for ``decimation`` physics steps, PD torque each step."""
        clip = self.meta["action_clip"]
        self.actions = np.clip(actions.astype(F32), -clip, clip)
        target = (self.default.astype(F32) + F32(self.meta["action_scale"]) * self.actions).astype(np.float64)
        for _ in range(self.meta["decimation"]):
            q, qd = self.data.qpos[self.qadr], self.data.qvel[self.dadr]
            self.data.qfrc_applied[self.dadr] = np.clip(self.kp * (target - q) - self.kd * qd, -self.limit, self.limit)
            mujoco.mj_step(self.model, self.data)

    def base_frame(self) -> np.ndarray:
        """The base's rotation matrix, base to world."""
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, self.data.qpos[3:7])
        return rot.reshape(3, 3)

    def fallen(self) -> bool:
        return self.base_frame()[2, 2] < 0.5 or self.data.qpos[2] < 0.15  # tilted past 60 degrees, or base down


class Deployer:
    """Robot + observer + policy, with the episode start rule in one place (:meth:`reset`)."""

    def __init__(self, policy_path: str, scene: str) -> None:
        self.meta = read_interface(policy_path)
        self.robot, self.observer, self.policy = Robot(scene, self.meta), Observer(self.meta), Policy(policy_path, self.meta)
        self.reset()

    def reset(self) -> None:
        self.robot.spawn()
        self.observer.reset()
        self.policy.reset()

    def step(self, command) -> np.ndarray:
        """One control step under ``command`` (vx, vy [m/s], yaw rate [rad/s]); returns the observation it acted on."""
        obs = self.observer(self.robot.quantities(np.asarray(command, np.float64)))
        self.robot.apply(self.policy(obs))
        return obs


#: Teleop keys (GLFW codes): up/down vx, left/right vy, Q/E yaw rate: (command column, change per press).
KEYS = {265: (0, 0.1), 264: (0, -0.1), 263: (1, 0.1), 262: (1, -0.1), ord("Q"): (2, 0.2), ord("E"): (2, -0.2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("policy"), parser.add_argument("scene")
    parser.add_argument("--commands", default="0:0,0,0 1:0.8,0,0 4:0,0,1 7:0.5,0,-1", help="time:vx,vy,wz ...")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--teleop", action="store_true", help="keyboard commands in MuJoCo's viewer (needs a display)")
    args = parser.parse_args()
    if args.teleop and sys.platform.startswith("linux") and not any(map(os.environ.get, ("DISPLAY", "WAYLAND_DISPLAY"))):
        raise SystemExit("--teleop needs a display (MuJoCo's viewer); DISPLAY is not set: use a desktop, ssh -X or xvfb-run.")
    dep = Deployer(args.policy, args.scene)
    dt, command = dep.meta["physics_dt"] * dep.meta["decimation"], np.zeros(3)
    script = [(float(t), [float(v) for v in c.split(",")]) for t, c in (p.split(":") for p in args.commands.split())]
    ranges = [dep.meta["commands"]["ranges"][k] for k in dep.meta["commands"]["columns"]]
    if args.teleop:
        from mujoco import viewer as mj_viewer

        def key(code: int) -> None:
            if code == 32:
                command[:] = 0.0
            elif code in KEYS:
                i, step = KEYS[code]
                command[i] = np.clip(command[i] + step, *ranges[i])
            print(f"command vx {command[0]:+.1f} vy {command[1]:+.1f} wz {command[2]:+.1f}")

        with mj_viewer.launch_passive(dep.robot.model, dep.robot.data, key_callback=key) as viewer:
            while viewer.is_running():
                start = time.perf_counter()
                dep.step(command)
                dep.reset() if dep.robot.fallen() else None
                viewer.sync()
                time.sleep(max(0.0, dt - (time.perf_counter() - start)))
        return
    sums: dict[float, list] = {}
    for k in range(int(round(args.seconds / dt))):
        t = k * dt
        since, command = max((s for s in script if s[0] <= t), key=lambda s: s[0], default=(0.0, [0.0, 0.0, 0.0]))
        dep.step(command)
        if dep.robot.fallen():
            print(f"t={t:.2f} s: fell; reset")
            dep.reset()
        if t >= since + 1.0:  # 1 s to reach a command, then measured: base-frame vx, vy and yaw rate
            vel = np.append((dep.robot.base_frame().T @ dep.robot.data.qvel[:3])[:2], dep.robot.data.qvel[5])
            entry = sums.setdefault(since, [command, np.zeros(3), 0])
            entry[1], entry[2] = entry[1] + vel, entry[2] + 1
    for since, (cmd, total, n) in sums.items():
        print(f"from {since:4.1f} s: command {np.round(cmd, 2).tolist()} reached {np.round(total / n, 3).tolist()}")


if __name__ == "__main__":
    main()
