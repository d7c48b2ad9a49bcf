"""The batched MuJoCo simulation behind the Go2 task.

One compiled scene (robot + plane or height field), ``num_variants`` physical copies of it for domain
randomisation (ground friction, added base mass, motor strength), and MuJoCo's threaded rollout API
stepping all N environments ``decimation`` physics steps in one C call per control step. The full
physics state of every env lives in one float64 array ``state [N, nstate]`` whose qpos / qvel columns
are exposed as numpy views and as torch tensors sharing the same memory (no copies on CPU).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import mujoco
import numpy as np
from mujoco import rollout

from tasks.go2.config import Go2Cfg
from tasks.go2.terrain import Terrain

ASSET = Path(__file__).parent / "assets" / "go2.xml"
LEGS = ("FL", "FR", "RL", "RR")
JOINT_NAMES = tuple(f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf"))
FEET = tuple(f"{leg}_foot_touch" for leg in LEGS)
COLLISION_ZONES = tuple(f"{leg}_{part}_touch" for part in ("thigh", "calf") for leg in LEGS)


def available_threads() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def build_model(cfg: Go2Cfg, terrain: Terrain) -> mujoco.MjModel:
    """Compile the scene: the robot of ``assets/go2.xml`` on a plane or on the terrain's height field."""
    return build_spec(cfg, terrain).compile()


def build_spec(cfg: Go2Cfg, terrain: Terrain) -> mujoco.MjSpec:
    """The scene before compilation (model variants edit it: :mod:`tasks.go2.variants`)."""
    spec = mujoco.MjSpec.from_file(str(ASSET))
    spec.option.timestep = cfg.sim.dt
    spec.option.iterations = cfg.sim.solver_iterations
    spec.option.ls_iterations = cfg.sim.solver_ls_iterations
    spec.option.cone = mujoco.mjtCone.mjCONE_PYRAMIDAL
    # A high impratio makes friction nearly hard (as in MuJoCo Menagerie's Go2): with the default of 1 the
    # soft pyramidal friction lets standing feet creep outward and the robot slowly does the splits.
    spec.option.impratio = 100.0
    spec.visual.global_.offwidth = 1280
    spec.visual.global_.offheight = 720
    world = spec.worldbody
    world.add_light(pos=[0, 0, 4], dir=[0, 0, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL)
    if terrain.is_flat:
        world.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05],
                       contype=1, conaffinity=0, condim=3, friction=[1.0, 0.005, 0.0001], rgba=[0.5, 0.55, 0.6, 1])
    else:
        data, size, pos = terrain.hfield_geometry()
        rows, cols = data.shape
        spec.add_hfield(name="terrain", size=list(size), nrow=rows, ncol=cols, userdata=data.ravel().tolist())
        world.add_geom(name="ground", type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname="terrain", pos=list(pos),
                       contype=1, conaffinity=0, condim=3, friction=[1.0, 0.005, 0.0001], rgba=[0.5, 0.55, 0.6, 1])
    world.add_camera(name="track", mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM, pos=[0.0, -2.0, 0.8],
                     xyaxes=[1, 0, 0, 0, 0.37, 0.93])
    return spec


class Go2Sim:
    """N Go2 environments stepped together.

    Attributes:
        model: the nominal compiled model (variant 0 before randomisation).
        variants: ``num_variants`` model copies with randomised ground friction, base mass and motor gains.
        variant_friction, variant_added_mass, variant_motor_strength: ``[K]`` numpy arrays of those draws.
        env_variant: ``[N]`` int array, the variant each env currently simulates.
        state: ``[N, nstate]`` float64 full physics state; ``qpos [N, 19]`` and ``qvel [N, 18]`` are views.
        sensordata: ``[N, nsensor]`` sensor readings at the last physics step of the last control step.
    """

    def __init__(self, cfg: Go2Cfg, num_envs: int, terrain: Terrain, rng: np.random.Generator) -> None:
        self.cfg = cfg
        self.num_envs = n = num_envs
        self.model = build_model(cfg, terrain)
        m = self.model
        self.nthread = int(cfg.sim.threads or available_threads())
        self.decimation = int(cfg.sim.decimation)

        # State layout of mjSTATE_FULLPHYSICS: time, qpos, qvel, ... (offsets computed, not assumed).
        self.nstate = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        qpos_start = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_TIME)
        qvel_start = mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_TIME | mujoco.mjtState.mjSTATE_QPOS)
        data = mujoco.MjData(m)
        mujoco.mj_resetData(m, data)
        initial = np.empty(self.nstate)
        mujoco.mj_getState(m, data, initial, mujoco.mjtState.mjSTATE_FULLPHYSICS)
        self.state = np.tile(initial, (n, 1))
        self.qpos = self.state[:, qpos_start : qpos_start + m.nq]
        self.qvel = self.state[:, qvel_start : qvel_start + m.nv]
        self.sensordata = np.zeros((n, m.nsensordata))
        self._state_out = np.zeros((n, self.decimation, self.nstate))
        self._sensor_out = np.zeros((n, self.decimation, m.nsensordata))
        self.ctrl = np.zeros((n, self.decimation, m.nu))

        # Sensor columns.
        def sensor_cols(names: tuple[str, ...]) -> np.ndarray:
            return np.array([m.sensor_adr[m.sensor(name).id] for name in names])

        self.foot_sensor = sensor_cols(FEET)
        self.collision_sensor = sensor_cols(COLLISION_ZONES)
        self.base_sensor = sensor_cols(("base_touch",))
        self.torque_sensor = sensor_cols(tuple(f"{j.removesuffix('_joint')}_torque" for j in JOINT_NAMES))
        self.joint_qpos = np.array([m.jnt_qposadr[m.joint(j).id] for j in JOINT_NAMES])
        self.joint_range = np.array([m.jnt_range[m.joint(j).id] for j in JOINT_NAMES])
        self.torque_limit = np.array([m.actuator_forcerange[m.actuator(j.removesuffix("_joint")).id, 1] for j in JOINT_NAMES])
        self.base_body = m.body("base").id
        self.ground_geom = m.geom("ground").id

        # Domain randomisation: K physical variants; envs pick one at every reset.
        dr = cfg.domain_rand
        k = max(1, int(dr.num_variants))
        self.variant_friction = (rng.uniform(*dr.friction_range, k) if dr.randomize_friction else np.ones(k))
        self.variant_added_mass = (rng.uniform(*dr.added_mass_range, k) if dr.randomize_base_mass else np.zeros(k))
        self.variant_motor_strength = (
            rng.uniform(*dr.motor_strength_range, k) if dr.randomize_motor_strength else np.ones(k)
        )
        self.variants: list[mujoco.MjModel] = []
        for i in range(k):
            v = copy.deepcopy(m)
            v.geom_friction[self.ground_geom, 0] = self.variant_friction[i]
            v.body_mass[self.base_body] += self.variant_added_mass[i]
            # PD gains: gainprm[0] = kp, biasprm[1] = -kp, biasprm[2] = -kd; strength scales the whole torque.
            v.actuator_gainprm[:, 0] = cfg.control.kp * self.variant_motor_strength[i]
            v.actuator_biasprm[:, 1] = -cfg.control.kp * self.variant_motor_strength[i]
            v.actuator_biasprm[:, 2] = -cfg.control.kd * self.variant_motor_strength[i]
            self.variants.append(v)
        self.env_variant = np.zeros(n, dtype=np.int64)
        self._models = [self.variants[0]] * n
        self._datas = [mujoco.MjData(m) for _ in range(max(1, self.nthread))]
        self._pool = rollout.Rollout(nthread=self.nthread if self.nthread > 1 else 0)

    def set_variants(self, env_ids: np.ndarray, variants: np.ndarray) -> None:
        """Assign physical variants to envs (at reset)."""
        self.env_variant[env_ids] = variants
        for e, v in zip(env_ids.tolist(), variants.tolist()):
            self._models[e] = self.variants[v]

    def step(self, joint_targets: np.ndarray) -> None:
        """Advance every env by ``decimation`` physics steps holding the PD targets ``[N, 12]`` fixed.

        Targets ``[N, decimation, 12]`` give one target per physics step instead (delayed actuation).
        """
        self.ctrl[:] = joint_targets if joint_targets.ndim == 3 else joint_targets[:, None, :]
        self._pool.rollout(self._models, self._datas, self.state, self.ctrl, control_spec=mujoco.mjtState.mjSTATE_CTRL.value,
                           skip_checks=True, nstep=self.decimation, initial_warmstart=None,
                           state=self._state_out, sensordata=self._sensor_out, chunk_size=None)
        self.state[:] = self._state_out[:, -1]
        self.sensordata[:] = self._sensor_out[:, -1]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None
