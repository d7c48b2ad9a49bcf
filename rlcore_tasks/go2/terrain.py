"""Terrain for the Go2 task: a flat plane, or a rough height field of difficulty tiles with a curriculum.

The rough terrain is a grid of ``num_levels x num_cols`` square tiles. Row ``l`` holds difficulty
``l / (num_levels - 1)``; columns cycle through the kinds in ``proportions`` (pyramid slopes, slopes with
bumps, stairs up and down, random bumps). Each env lives on one tile (``levels``, ``cols``); the MuJoCo
envs are separate simulations, so robots never meet even when they share a tile. Heights are kept as a
torch grid ``[rows (y), cols (x)]`` in the same layout MuJoCo's height field uses, so the height scan
reads exactly the surface the robot stands on (same triangulation as MuJoCo's height field).
"""

from __future__ import annotations

import numpy as np
import torch

from rlcore.env import ConfigError
from rlcore_tasks.go2.config import TerrainCfg

TERRAIN_TYPES = ("flat", "rough")
TILE_KINDS = ("slope", "rough_slope", "stairs_up", "stairs_down", "random")


class Terrain:
    """Height map, env origins and the level curriculum.

    Args:
        cfg: terrain settings.
        num_envs: number of envs N.
        device: torch device of every tensor.
        generator: torch generator for the initial levels and the curriculum's random re-spawns.
    """

    def __init__(self, cfg: TerrainCfg, num_envs: int, device: torch.device, generator: torch.Generator) -> None:
        if cfg.type not in TERRAIN_TYPES:
            raise ConfigError(f"terrain.type {cfg.type!r} is not one of {list(TERRAIN_TYPES)}")
        unknown = set(cfg.proportions) - set(TILE_KINDS)
        if unknown:
            raise ConfigError(f"terrain.proportions: unknown kinds {sorted(unknown)}; valid: {list(TILE_KINDS)}")
        self.cfg = cfg
        self.device = device
        self.generator = generator
        self.num_envs = num_envs
        self.is_flat = cfg.type == "flat"
        self.levels = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.cols = torch.zeros(num_envs, dtype=torch.long, device=device)
        if self.is_flat:
            self.heights = torch.zeros(1, 1, device=device)
            self.hscale = 1.0
            self.num_levels = 1
            return
        self.hscale = cfg.horizontal_scale
        self.num_levels = cfg.num_levels
        self.heights_np = self._generate(cfg)  # float64 [rows (y), cols (x)]
        self.heights = torch.as_tensor(self.heights_np, dtype=torch.float32, device=device)
        max_init = max(0, min(cfg.max_init_level, cfg.num_levels - 1))
        self.levels = torch.randint(0, max_init + 1, (num_envs,), generator=generator, device=device)
        self.cols = torch.arange(num_envs, device=device) % cfg.num_cols

    # ------------------------------------------------------------------ generation (numpy, once)
    def tile_kinds(self) -> list[str]:
        """The kind of each column, in order."""
        weights = np.array([self.cfg.proportions.get(k, 0.0) for k in TILE_KINDS], dtype=np.float64)
        if weights.sum() <= 0:
            raise ConfigError("terrain.proportions: at least one kind needs a positive share")
        counts = np.floor(weights / weights.sum() * self.cfg.num_cols + 1e-9).astype(int)
        while counts.sum() < self.cfg.num_cols:  # hand the remainder to the largest shares
            counts[np.argmax(weights / weights.sum() * self.cfg.num_cols - counts)] += 1
        return [kind for kind, n in zip(TILE_KINDS, counts) for _ in range(n)]

    def _generate(self, cfg: TerrainCfg) -> np.ndarray:
        rng = np.random.default_rng(cfg.seed)
        n = int(round(cfg.tile_size / cfg.horizontal_scale))  # cells per tile side
        rows, cols = cfg.num_cols * n + 1, cfg.num_levels * n + 1  # rows along y (columns), cols along x (levels)
        heights = np.zeros((rows, cols))
        coords = (np.arange(n) + 0.5) * cfg.horizontal_scale - cfg.tile_size / 2  # cell centres in the tile
        dx, dy = np.meshgrid(coords, coords, indexing="xy")  # [y, x]
        ring = np.maximum(np.abs(dx), np.abs(dy))  # distance from the centre in the square (pyramid) metric
        platform = 1.0  # half-width of the flat spawn platform [m]
        for level in range(cfg.num_levels):
            difficulty = level / max(cfg.num_levels - 1, 1)
            for col, kind in enumerate(self.tile_kinds()):
                if kind in ("slope", "rough_slope"):
                    slope = cfg.max_slope * difficulty
                    tile = -slope * np.clip(ring - platform, 0.0, None)  # centre high, edges low
                    if kind == "rough_slope":
                        tile = tile + rng.uniform(-1, 1, tile.shape) * cfg.max_roughness * max(difficulty, 0.2) * 0.5
                elif kind in ("stairs_up", "stairs_down"):
                    step = 0.05 + (cfg.max_step_height - 0.05) * difficulty
                    steps = np.floor(np.clip(ring - platform, 0.0, None) / cfg.step_width)
                    tile = (-1.0 if kind == "stairs_up" else 1.0) * steps * step
                else:  # random bumps on a coarse lattice (about 2 cells per bump)
                    amp = cfg.max_roughness * max(difficulty, 0.1)
                    coarse = rng.uniform(-amp, amp, (n // 2 + 1, n // 2 + 1))
                    tile = np.kron(coarse, np.ones((2, 2)))[:n, :n]
                heights[col * n : (col + 1) * n, level * n : (level + 1) * n] = tile - tile[n // 2, n // 2]
        return heights

    # ------------------------------------------------------------------ queries (torch)
    def origins(self, env_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Spawn point (x, y, ground height) of each env's tile centre, ``[n, 3]``."""
        levels = self.levels if env_ids is None else self.levels[env_ids]
        cols = self.cols if env_ids is None else self.cols[env_ids]
        if self.is_flat:
            return torch.zeros(levels.shape[0], 3, device=self.device)
        x = (levels.float() + 0.5) * self.cfg.tile_size
        y = (cols.float() + 0.5) * self.cfg.tile_size
        xy = torch.stack([x, y], dim=-1)
        return torch.cat([xy, self.height_at(xy).unsqueeze(-1)], dim=-1)

    def height_at(self, xy: torch.Tensor) -> torch.Tensor:
        """Terrain height under world points ``xy [..., 2]``, shape ``[...]``.

        Interpolates exactly as MuJoCo triangulates a height field: each cell is split along its diagonal
        from ``(x0, y0)`` to ``(x0 + 1, y0 + 1)``, and the height is linear on each triangle. Points beyond
        the field take the height of its nearest edge.
        """
        if self.is_flat:
            return torch.zeros(xy.shape[:-1], device=xy.device)
        rows, cols = self.heights.shape
        gx = (xy[..., 0] / self.hscale).clamp(0, cols - 1)
        gy = (xy[..., 1] / self.hscale).clamp(0, rows - 1)
        x0 = gx.floor().long().clamp(0, cols - 2)
        y0 = gy.floor().long().clamp(0, rows - 2)
        fx, fy = gx - x0, gy - y0
        h = self.heights
        h00, h01 = h[y0, x0], h[y0, x0 + 1]
        h10, h11 = h[y0 + 1, x0], h[y0 + 1, x0 + 1]
        lower = h00 + fx * (h01 - h00) + fy * (h11 - h01)  # triangle (x0,y0) (x0+1,y0) (x0+1,y0+1): fx >= fy
        upper = h00 + fy * (h10 - h00) + fx * (h11 - h10)  # triangle (x0,y0) (x0,y0+1) (x0+1,y0+1): fx < fy
        return torch.where(fx >= fy, lower, upper)

    def hfield_geometry(self) -> tuple[np.ndarray, tuple[float, float, float, float], tuple[float, float, float]]:
        """MuJoCo height-field data (normalised to [0, 1]), its ``size`` and the geom position."""
        h = self.heights_np
        lo, hi = float(h.min()), float(h.max())
        span = max(hi - lo, 1e-3)
        rows, cols = h.shape
        half_x, half_y = (cols - 1) * self.hscale / 2, (rows - 1) * self.hscale / 2
        data = (h - lo) / span
        return data, (half_x, half_y, span, 1.0), (half_x, half_y, lo)

    def update_curriculum(self, env_ids: torch.Tensor, distance: torch.Tensor, commanded: torch.Tensor) -> None:
        """Promote envs that walked over half a tile, demote those that covered under half their command.

        Args:
            env_ids: envs being reset ``[n]``.
            distance: distance each walked from its spawn point this episode ``[n]`` [m].
            commanded: distance its commands asked for over the episode ``[n]`` [m].
        """
        if self.is_flat or not self.cfg.curriculum or env_ids.numel() == 0:
            return
        up = distance > self.cfg.tile_size / 2
        down = (distance < commanded * 0.5) & ~up
        levels = self.levels[env_ids] + up.long() - down.long()
        # Robots that master the hardest level are sent back to a random level, so all levels stay in use.
        mastered = levels >= self.num_levels
        random_levels = torch.randint(0, self.num_levels, levels.shape, generator=self.generator, device=self.device)
        levels = torch.where(mastered, random_levels, levels.clamp(min=0))
        self.levels[env_ids] = levels

    def mean_level(self) -> torch.Tensor:
        return self.levels.float().mean()


def scan_points(x_range: list[float], y_range: list[float], resolution: float) -> torch.Tensor:
    """Grid of scan points in the base's yaw frame, ``[H (y), W (x), 2]``."""
    nx = int(round((x_range[1] - x_range[0]) / resolution)) + 1
    ny = int(round((y_range[1] - y_range[0]) / resolution)) + 1
    xs = torch.linspace(x_range[0], x_range[1], nx)
    ys = torch.linspace(y_range[0], y_range[1], ny)
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], dim=-1)


__all__ = ["TERRAIN_TYPES", "TILE_KINDS", "Terrain", "scan_points"]
