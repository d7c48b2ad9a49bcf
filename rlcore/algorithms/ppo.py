"""Proximal Policy Optimization (Schulman et al., 2017), read top to bottom.

One iteration, as the runner drives it::

    for t in range(T):                     # collection, under torch.inference_mode
        a_t = ppo.act(obs_t)               # sample a ~ pi(.|o_t); store o_t, a_t, V(o_t), log pi(a_t|o_t), dist params
        obs, r, done, extras = env.step(a_t)
        ppo.process_env_step(obs, r, done, extras)   # store r_t (+ bootstrap of time-outs), done_t
    ppo.compute_returns(obs_T)             # GAE(gamma, lambda) -> advantages A_t and return targets R_t
    losses = ppo.update()                  # K epochs x M mini-batches of the clipped objective

Tensors: observations are ``TensorDict[N]`` of groups; storage buffers are ``[T, N, ...]``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import replace
from itertools import chain

import torch
import torch.nn as nn
from tensordict import TensorDict

from rlcore.algorithms.factory import construct_ppo
from rlcore.distributed import (
    all_reduce_mean,
    all_reduce_mean_grads,
    broadcast_tensors,
    is_distributed,
    pooled_moments,
)
from rlcore.env import VecEnv
from rlcore.errors import ConfigError
from rlcore.extensions import PPO_EXTENSIONS, EstimatorLoss, Extension
from rlcore.models import MLPModel
from rlcore.modules import EmpiricalDiscountedVariationNormalization, HiddenState
from rlcore.storage import RolloutStorage
from rlcore.utils.compile import compile_mlp_heads
from rlcore.utils.optimizer import resolve_optimizer

LR_MIN, LR_MAX = 1e-5, 1e-2
"""Bounds of the adaptive-KL learning rate."""


class PPO:
    """PPO with GAE, clipped surrogate, (clipped) value loss, entropy bonus and an adaptive-KL learning rate.

    Args (rsl_rl 5.5.1's, in its positional order, then rlcore's own):
        actor: stochastic policy model (has a distribution).
        critic: value model with output dim 1.
        storage: rollout storage of type "rl".
        num_learning_epochs: K passes over the rollout per update.
        num_mini_batches: M mini-batches per epoch.
        clip_param: epsilon of the clipped ratio (and of the value clipping).
        gamma, lam: discount and GAE lambda.
        value_loss_coef, entropy_coef: loss weights.
        learning_rate: initial learning rate.
        max_grad_norm: bound on the gradient norm, applied to the actor and to the critic separately (as rsl_rl).
        optimizer: "adam", "adamw", "sgd" or "rmsprop".
        use_clipped_value_loss: clip V around the rollout's value like the policy ratio.
        schedule: "adaptive" (KL-driven learning rate) or "fixed".
        desired_kl: target KL for the adaptive schedule.
        normalize_advantage_per_mini_batch: normalise advantages per mini-batch instead of over the rollout.
        use_mixed_precision: run forward passes of the update under bf16 autocast.
        device: torch device of models and storage.
        rnd_cfg, symmetry_cfg: extension configs (see rlcore.extensions), built into :attr:`extensions`.
        multi_gpu_cfg: ``{"global_rank", "local_rank", "world_size"}`` when launched by torchrun.
        grad_reduce_bucket_mb: size of the gradient all-reduce buckets.
        reshuffle_each_epoch: new permutation of the transitions every epoch (feed-forward models).
        reward_normalization: divide rewards by the running std of the discounted return.
        use_bf16: same as ``use_mixed_precision`` (rlcore's older name).
        torch_compile: compile the models' MLP heads with ``torch.compile`` (default mode; see :meth:`compile`).
        clip_gradients_jointly: clip the joint norm of actor and critic gradients instead (rlcore's former
            behaviour): the critic's usually much larger gradient then shrinks the actor's step too.
        extensions: further :class:`~rlcore.extensions.Extension` instances, run after the configured ones, e.g.
            the exploration schedule (:class:`~rlcore.extensions.exploration.ExplorationSchedule`: a std ceiling and
            a per-env std factor over iterations), which the factory builds from ``exploration_cfg``.

    Extensions (RND, symmetry, your own) plug in through the hooks of :class:`~rlcore.extensions.Extension`;
    PPO calls each hook of every extension in :attr:`extensions` at its place. rsl_rl's attributes ``rnd`` and
    ``symmetry`` hold the extension of that name, or None.
    """

    actor: MLPModel
    critic: MLPModel

    def __init__(
        self,
        actor: MLPModel,
        critic: MLPModel,
        storage: RolloutStorage,
        num_learning_epochs: int = 5,
        num_mini_batches: int = 4,
        clip_param: float = 0.2,
        gamma: float = 0.99,
        lam: float = 0.95,
        value_loss_coef: float = 1.0,
        entropy_coef: float = 0.01,
        learning_rate: float = 1e-3,
        max_grad_norm: float = 1.0,
        optimizer: str = "adam",
        use_clipped_value_loss: bool = True,
        schedule: str = "adaptive",
        desired_kl: float = 0.01,
        normalize_advantage_per_mini_batch: bool = False,
        use_mixed_precision: bool = False,
        device: str = "cpu",
        rnd_cfg: dict | None = None,
        symmetry_cfg: dict | None = None,
        multi_gpu_cfg: dict | None = None,
        grad_reduce_bucket_mb: float = 25.0,
        # rlcore's own settings, after rsl_rl's (so rsl_rl's positional order holds):
        reshuffle_each_epoch: bool = True,
        reward_normalization: bool = False,
        use_bf16: bool = False,
        torch_compile: bool = False,
        clip_gradients_jointly: bool = False,
        extensions: Sequence[Extension] = (),
    ) -> None:
        _check_settings(actor, schedule)
        self.device = device
        self.actor, self.critic, self.storage = actor, critic, storage
        self.is_recurrent = actor.is_recurrent or critic.is_recurrent
        self.num_learning_epochs, self.num_mini_batches = num_learning_epochs, num_mini_batches
        self.clip_param, self.gamma, self.lam = clip_param, gamma, lam
        self.value_loss_coef, self.entropy_coef = value_loss_coef, entropy_coef
        self.learning_rate, self.max_grad_norm = learning_rate, max_grad_norm
        self.clip_gradients_jointly = bool(clip_gradients_jointly)
        self.use_clipped_value_loss, self.schedule, self.desired_kl = use_clipped_value_loss, schedule, desired_kl
        self.normalize_advantage_per_mini_batch = normalize_advantage_per_mini_batch
        self.reshuffle_each_epoch = reshuffle_each_epoch
        self.use_mixed_precision = bool(use_mixed_precision or use_bf16)  # bf16 autocast in the update
        self.use_bf16 = self.use_mixed_precision
        self._init_distributed(multi_gpu_cfg, grad_reduce_bucket_mb)
        self._init_extensions({"rnd_cfg": rnd_cfg, "symmetry_cfg": symmetry_cfg}, extensions)
        self.reward_normalizer = (
            EmpiricalDiscountedVariationNormalization(gamma=gamma).to(device) if reward_normalization else None
        )
        # One optimiser over actor and critic; a CNN encoder shared by both appears once.
        self.optimizer = resolve_optimizer(optimizer)(_unique_params(actor, critic), lr=learning_rate)
        if torch_compile:
            self.compile("default")
        self.transition = RolloutStorage.Transition()
        self.intrinsic_rewards: torch.Tensor | None = None
        self.set_iteration(0)

    def set_iteration(self, iteration: int) -> None:
        """Apply the extensions' iteration-dependent settings for learning iteration ``iteration`` (the runner calls
        this before each rollout; a resumed run continues at its iteration), e.g. an exploration schedule's std
        ceiling and per-env std factor."""
        for ext in self.extensions:
            ext.set_iteration(self, iteration)

    def _init_distributed(self, multi_gpu_cfg: dict | None, grad_reduce_bucket_mb: float) -> None:
        """World size and rank from torchrun's ``multi_gpu_cfg`` (None: one process)."""
        self.multi_gpu_cfg = multi_gpu_cfg
        self.grad_reduce_bucket_mb = grad_reduce_bucket_mb
        self.gpu_world_size = int(multi_gpu_cfg.get("world_size", 1)) if multi_gpu_cfg else 1
        self.is_multi_gpu = self.gpu_world_size > 1
        self.gpu_global_rank = int(multi_gpu_cfg.get("global_rank", 0)) if multi_gpu_cfg else 0

    def _init_extensions(self, cfgs: dict[str, dict | None], extensions: Sequence[Extension]) -> None:
        """Build the extensions configured by dicts (``PPO_EXTENSIONS``: ``rnd_cfg``, ``symmetry_cfg``), then add
        the given instances; each first checks that it can work with these models (e.g. symmetry: no RNN)."""
        self.extensions: list[Extension] = [cls.from_cfg(cfgs[key], self) for key, cls in PPO_EXTENSIONS.items()
                                            if cfgs.get(key) is not None]
        # A model with a state estimator brings its supervised loss (rlcore.models.mlp_model.StateEstimator).
        self.extensions += [EstimatorLoss(part) for part in ("actor", "critic")
                            if getattr(getattr(self, part), "estimator", None) is not None]
        for ext in extensions:
            if not isinstance(ext, Extension):
                raise ConfigError(f"PPO's extensions must be rlcore.extensions.Extension instances, got "
                                  f"{type(ext).__name__}.")
            ext.check_algorithm(self)
            self.extensions.append(ext)
        by_name = {ext.name: ext for ext in self.extensions}
        if len(by_name) != len(self.extensions):
            raise ConfigError(f"PPO's extensions must have distinct names (they key checkpoints and load_cfg), got "
                              f"{[ext.name for ext in self.extensions]}.")
        self.rnd = by_name.get("rnd")  # rsl_rl's attributes
        self.symmetry = by_name.get("symmetry")

    # ====================================================================== collection
    def act(self, obs: TensorDict) -> torch.Tensor:
        """Sample actions ``[N, A]`` for observations ``obs`` and record what the update will need."""
        t = self.transition
        # Recurrent models: the state *entering* this step, so updates can replay from trajectory starts.
        states_in = (self.actor.get_hidden_state(), self.critic.get_hidden_state()) if self.is_recurrent else None
        t.actions = self.actor(obs, stochastic_output=True)
        t.distribution_params = self.actor.output_distribution_params  # the policy's own (KL of the schedule)
        t.noise_scale = self._action_std_scale()
        if t.noise_scale is not None:  # env i's behaviour policy is N(mu, (k_i sigma)^2): resample with it
            self.actor.distribution.scale_std(t.noise_scale)
            t.actions = self.actor.distribution.sample()
        t.actions_log_prob = self.actor.get_output_log_prob(t.actions)  # log pi_old(a|s), with the env's std
        t.values = self.critic(obs)
        t.observations = obs
        if states_in is not None:
            # A model that has not run yet has no state (None = zeros): store explicit zeros shaped like the
            # state it has now, so even a rollout of one step has hidden states to replay from.
            t.hidden_states = tuple(_zeros_like_state(model.get_hidden_state()) if h is None else h
                                    for h, model in zip(states_in, (self.actor, self.critic)))
        return t.actions

    def _action_std_scale(self) -> torch.Tensor | None:
        """The extensions' per-env factor ``k`` ``[N, 1]`` on the std (their product), None when none gives one."""
        scales = [k for ext in self.extensions if (k := ext.action_std_scale()) is not None]
        return None if not scales else scales[0] if len(scales) == 1 else torch.stack(scales).prod(dim=0)

    def process_env_step(
        self, obs: TensorDict, rewards: torch.Tensor, dones: torch.Tensor, extras: dict
    ) -> None:
        """Record the step's rewards and dones; fold the time-out bootstrap into the reward.

        A time-out is not a terminal state: the return continues past the cut, so we add
        ``gamma * V(s_final)`` to the last reward, with ``s_final`` the state reached before the reset
        (``extras["final_observations"]``), or V of the step's own observation when the env does not
        provide it (rsl_rl's approximation). GAE then treats every done as the end of the episode.
        """
        t = self.transition
        rewards = rewards.float()
        # Reward normalisers pool their statistics over ranks, so every rank scales rewards alike.
        if self.reward_normalizer is not None:
            rewards = self.reward_normalizer(rewards, dones, sync=self.is_multi_gpu)
        bonus = self._intrinsic_reward(obs)
        if bonus is not None:  # exploration bonus (RND); kept for logging
            self.intrinsic_rewards = bonus
            rewards = rewards + self.intrinsic_rewards
        time_outs = extras.get("time_outs")
        if time_outs is not None:
            time_outs = time_outs.to(self.device).bool().reshape(-1)
            final_obs = extras.get("final_observations")
            if final_obs is None:
                bootstrap = t.values.reshape(-1)
            elif self.critic.is_recurrent:  # needs every env's carried state
                bootstrap = self._peek_values(final_obs.to(self.device)).reshape(-1)
            else:  # evaluate only the truncated envs: most steps have none
                idx = time_outs.nonzero().squeeze(-1)
                bootstrap = torch.zeros_like(rewards)
                if idx.numel() > 0:
                    bootstrap[idx] = self.critic(final_obs.to(self.device)[idx]).reshape(-1).to(rewards.dtype)
            # Select rather than multiply: rows that are not time-outs may hold anything (even NaN) in
            # final_observations, and NaN * 0 would still poison their rewards.
            rewards = rewards + self.gamma * torch.where(time_outs, bootstrap, 0.0)
        t.rewards = rewards
        t.dones = dones
        self.storage.add_transition(t)
        t.clear()
        self.actor.reset(dones)
        self.critic.reset(dones)

    def _intrinsic_reward(self, obs: TensorDict) -> torch.Tensor | None:
        """Sum ``[N]`` of the extensions' intrinsic rewards for the step's new observations; None if none gives one."""
        bonuses = [r for ext in self.extensions if (r := ext.intrinsic_reward(obs, sync=self.is_multi_gpu)) is not None]
        return sum(bonuses[1:], bonuses[0]) if bonuses else None

    def _peek_values(self, obs: TensorDict) -> torch.Tensor:
        """V(obs) ``[N, 1]`` without advancing a recurrent critic's carried state."""
        if not self.critic.is_recurrent:
            return self.critic(obs)
        state = self.critic.get_hidden_state()
        values = self.critic(obs)
        self.critic.reset(hidden_state=state)
        return values

    def compute_returns(self, obs: TensorDict) -> None:
        """Generalised Advantage Estimation over the rollout (Schulman et al., 2016).

        ``delta_t = r_t + gamma * V(s_{t+1}) * (1 - done_t) - V(s_t)``
        ``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}``,   ``R_t = A_t + V(s_t)`` (value target).
        ``(1 - done_t)`` stops both the bootstrap and the recursion at an episode end, so GAE never crosses
        into the next episode (time-outs were already bootstrapped in ``process_env_step``).
        Advantages are normalised after the return target is built from the raw ones.
        """
        st = self.storage
        last_values = self._peek_values(obs).detach()
        advantage = torch.zeros_like(last_values)
        for step in reversed(range(st.num_transitions_per_env)):
            next_values = last_values if step == st.num_transitions_per_env - 1 else st.values[step + 1]
            not_done = 1.0 - st.dones[step].float()
            delta = st.rewards[step] + self.gamma * next_values * not_done - st.values[step]
            advantage = delta + self.gamma * self.lam * not_done * advantage
            st.returns[step] = advantage + st.values[step]
        st.advantages.copy_(st.returns - st.values)
        if not self.normalize_advantage_per_mini_batch:
            st.advantages.copy_(_normalize(st.advantages))

    # ====================================================================== update
    def update(self) -> dict[str, float]:
        """K epochs x M mini-batches, each a :meth:`compute_loss` and an optimiser step; returns each term's mean.

        Keys: "value", "surrogate", "entropy", "kl", the extensions' ``loss_names`` ("rnd", "symmetry") and
        "learning_rate" (after the update).
        """
        sums = dict.fromkeys(("value", "surrogate", "entropy", "kl", *self._extension_loss_names()), 0.0)
        num_updates = 0
        for batch in self._mini_batches():
            loss, terms = self.compute_loss(batch)
            if self.schedule == "adaptive" and self.desired_kl is not None:
                self._adapt_learning_rate(terms["kl"])
            self._optimizer_step(loss)
            for ext in self.extensions:  # networks of their own (RND's predictor) step after PPO's
                terms.update(ext.after_step(batch, sync=self.is_multi_gpu))
            for name, value in terms.items():
                sums[name] += float(value)
            num_updates += 1

        # Normalisers learn from the whole rollout only now, so every mini-batch above saw the same
        # statistics as the rollout did (the first ratio of the next update starts at exactly 1).
        self.update_normalization(self.storage.observations)
        self.storage.clear()
        out = {k: v / max(num_updates, 1) for k, v in sums.items()}
        out["learning_rate"] = self.learning_rate
        return out

    def compute_loss(self, batch: RolloutStorage.Batch) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's objective on one mini-batch (Schulman et al., 2017), to minimise::

            r      = pi(a|s) / pi_old(a|s)                                   probability ratio
            L_clip = E[max(-A r, -A clip(r, 1 - eps, 1 + eps))]              clipped surrogate (negated)
            L_V    = E[max((V - R)^2, (V_old + clip(V - V_old, -eps, eps) - R)^2)]   or E[(R - V)^2] unclipped
            L      = L_clip + c_v L_V - c_e H[pi]   (+ the extensions' extra terms)

        with advantages ``A``, return targets ``R`` and the rollout's values ``V_old`` from :meth:`compute_returns`.

        Returns:
            The scalar loss (with its graph) and the detached terms to log: "surrogate", "value", "entropy",
            "kl" (mean KL(pi_old || pi), over all ranks) and the extensions' ``loss_names``.
        """
        if self.normalize_advantage_per_mini_batch:
            batch = replace(batch, advantages=_normalize(batch.advantages))
        # Extensions may append rows (symmetry: mirrored copies labelled with mirrored actions); the first n_orig
        # rows are the rollout's own. The KL against the rollout's distribution and the entropy bonus are taken
        # on those; the appended rows enter the surrogate and value losses.
        n_orig = batch.actions.shape[0]
        aug = self._augment(batch)
        log_prob, values, entropy, dist_params = self._evaluate(aug)
        old_params = batch.old_distribution_params
        new_params = tuple(p[:n_orig] for p in dist_params)
        entropy = entropy[:n_orig]
        kl_mean = self._mean_kl(old_params, new_params)

        old_log_prob = aug.old_actions_log_prob.squeeze(-1)
        ratio = torch.exp(log_prob - old_log_prob)  # r = exp(log pi - log pi_old)
        adv = aug.advantages.squeeze(-1)
        surrogate = torch.max(-adv * ratio, -adv * ratio.clamp(1.0 - self.clip_param, 1.0 + self.clip_param))
        surrogate_loss = surrogate.mean()  # L_clip
        value_loss = self._value_loss(values, aug.values, aug.returns)  # L_V
        loss = surrogate_loss + self.value_loss_coef * value_loss - self.entropy_coef * entropy.mean()

        terms = {"value": value_loss, "surrogate": surrogate_loss, "entropy": entropy.mean(), "kl": kl_mean}
        for ext in self.extensions:  # e.g. symmetry's mirror loss, on the mini-batch as stored
            extra = ext.extra_loss(self, batch)
            if extra is not None:
                term, logged = extra
                loss = loss + term
                terms.update(logged)
        return loss, {k: v.detach() for k, v in terms.items()}

    def _mini_batches(self):
        """The storage's mini-batch generator: whole trajectories for recurrent models, transitions otherwise."""
        if self.is_recurrent:
            return self.storage.recurrent_mini_batch_generator(self.num_mini_batches, self.num_learning_epochs)
        return self.storage.mini_batch_generator(
            self.num_mini_batches, self.num_learning_epochs, self.reshuffle_each_epoch
        )

    def _augment(self, batch: RolloutStorage.Batch) -> RolloutStorage.Batch:
        """The mini-batch after every extension's ``augment_mini_batch`` (the given one when none augments)."""
        for ext in self.extensions:
            batch = ext.augment_mini_batch(batch)
        return batch

    def _evaluate(self, batch: RolloutStorage.Batch):
        """Forward passes of the current models (under bf16 autocast if configured).

        Returns log pi(a|s) ``[B]``, V(s) ``[B, 1]``, the entropy ``[B]`` and the distribution's parameters (each
        ``[B, ...]``; recurrent mini-batches: ``[T, n, ...]`` instead of ``[B, ...]``).
        """
        autocast = (torch.autocast(device_type=torch.device(self.device).type, dtype=torch.bfloat16)
                    if self.use_mixed_precision else contextlib.nullcontext())
        obs, masks, (actor_state, critic_state) = batch.observations, batch.masks, batch.hidden_states
        with autocast:
            self.actor(obs, masks=masks, hidden_state=actor_state, stochastic_output=True)
            entropy, params = self.actor.output_entropy.float(), self.actor.output_distribution_params
            if batch.noise_scale is not None:  # log pi(a|s) with the std this sample was drawn with
                self.actor.distribution.scale_std(batch.noise_scale)
            log_prob = self.actor.get_output_log_prob(batch.actions).float()
            values = self.critic(obs, masks=masks, hidden_state=critic_state).float()
        return log_prob, values, entropy, params

    @torch.no_grad()
    def _mean_kl(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """Mean KL(pi_old || pi) of the mini-batch, averaged over all ranks' mini-batches (as logged), so the
        adaptive learning rate that rank 0 derives from it suits every rank."""
        kl_mean = self.actor.get_kl_divergence(old_params, new_params).mean()
        if self.is_multi_gpu:
            all_reduce_mean(kl_mean)
        return kl_mean

    def _value_loss(self, values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        """``E[(V - R)^2]``, or with clipping the larger of that and ``E[(V_clip - R)^2]`` elementwise, where
        ``V_clip = V_old + clip(V - V_old, -eps, eps)``: moving V more than eps from the rollout's value gains nothing."""
        if self.use_clipped_value_loss:
            clipped = old_values + (values - old_values).clamp(-self.clip_param, self.clip_param)
            return torch.max((values - returns).square(), (clipped - returns).square()).mean()
        return (returns - values).square().mean()

    def _optimizer_step(self, loss: torch.Tensor) -> None:
        """Gradient step: average gradients over ranks, then bound ||g_actor|| and ||g_critic|| by max_grad_norm
        each (g <- g * min(1, max_grad_norm / ||g||)), or their joint norm if so configured."""
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.is_multi_gpu:
            all_reduce_mean_grads(self._params(), self.grad_reduce_bucket_mb)
        if self.clip_gradients_jointly:
            nn.utils.clip_grad_norm_(self._params(), self.max_grad_norm)
        else:
            clip_grad_norm_per_model(self._clip_groups(), self.max_grad_norm)
        self.optimizer.step()

    def _clip_groups(self) -> list[nn.Module | list[nn.Parameter]]:
        """What :meth:`_optimizer_step` clips separately: the actor and the critic, and apart from them each one's
        state estimator, whose supervised gradient would otherwise shrink the policy's step under the bound."""
        models: list[nn.Module] = [self.actor, self.critic]
        estimators = [e for m in models if (e := getattr(m, "estimator", None)) is not None]
        if not estimators:
            return models
        own = {p for e in estimators for p in e.parameters()}
        return [[p for p in m.parameters() if p not in own] for m in models] + estimators

    def _extension_loss_names(self) -> list[str]:
        return [name for ext in self.extensions for name in ext.loss_names]

    def _adapt_learning_rate(self, kl_mean: torch.Tensor) -> None:
        """Shrink the learning rate when the policy moved too far (KL > 2 kl*), grow it when it barely moved
        (KL < kl*/2); rank 0 decides and every rank applies the same value."""
        if self.gpu_global_rank == 0:
            if kl_mean > 2.0 * self.desired_kl:
                self.learning_rate = max(LR_MIN, self.learning_rate / 1.5)
            elif 0.0 < kl_mean < 0.5 * self.desired_kl:
                self.learning_rate = min(LR_MAX, self.learning_rate * 1.5)
        if self.is_multi_gpu:
            lr = torch.tensor([self.learning_rate], device=self.device, dtype=torch.float64)
            torch.distributed.broadcast(lr, src=0)
            self.learning_rate = float(lr.item())
        for group in self.optimizer.param_groups:
            group["lr"] = self.learning_rate

    def update_normalization(self, obs: TensorDict) -> None:
        """Merge observations (``[T, N]`` or ``[N]``) into every normaliser (pooled over ranks when distributed)."""
        sync = self.is_multi_gpu
        self.actor.update_normalization(obs, sync=sync)
        self.critic.update_normalization(obs, sync=sync)
        for ext in self.extensions:
            ext.update_normalization(obs, sync=sync)

    # ====================================================================== modes, policy, persistence
    def _params(self) -> list[nn.Parameter]:
        return [p for group in self.optimizer.param_groups for p in group["params"]]

    def train_mode(self) -> None:
        self.actor.train()
        self.critic.train()
        for ext in self.extensions:
            ext.train_mode()

    def eval_mode(self) -> None:
        self.actor.eval()
        self.critic.eval()
        for ext in self.extensions:
            ext.eval_mode()

    def get_policy(self) -> MLPModel:
        """The actor (call it with ``stochastic_output=False`` for deployment actions)."""
        return self.actor

    def save(self) -> dict:
        """State for a checkpoint: rsl_rl 5.x keys plus what an exact resume needs."""
        state = {
            "actor_state_dict": self.actor.state_dict(),
            "critic_state_dict": self.critic.state_dict(),
            "optimizer_state_dict": self.optimizer.state_dict(),
            "learning_rate": self.learning_rate,
        }
        if self.reward_normalizer is not None:
            state["reward_normalizer_state_dict"] = self.reward_normalizer.state_dict()
        for ext in self.extensions:
            state.update(ext.save())
        return state

    def rank_state_dict(self) -> dict:
        """This rank's per-env state (:mod:`rlcore.runners.run_state`): the reward normaliser's per-env discounted
        returns (its statistics are shared and saved by :meth:`save`) and each extension's own
        (``Extension.rank_state_dict``, e.g. RND's reward normaliser), under ``extensions/<name>``."""
        state: dict = {}
        if self.reward_normalizer is not None:
            state["reward_disc_return"] = self.reward_normalizer.disc_return.clone()
        extensions = {ext.name: ext.rank_state_dict() for ext in self.extensions}
        extensions = {name: ext_state for name, ext_state in extensions.items() if ext_state}
        if extensions:
            state["extensions"] = extensions
        return state

    def load_rank_state_dict(self, state: dict) -> None:
        """Restore :meth:`rank_state_dict`'s output."""
        if self.reward_normalizer is not None and "reward_disc_return" in state:
            self.reward_normalizer.disc_return = torch.as_tensor(state["reward_disc_return"]).to(self.device).clone()
        saved = state.get("extensions") or {}
        for ext in self.extensions:
            if ext.name in saved:
                ext.load_rank_state_dict(saved[ext.name])

    def load(self, loaded_dict: dict, load_cfg: dict | None = None, strict: bool = True) -> bool:
        """Restore from ``save()``'s dict (or an rsl_rl checkpoint). ``load_cfg`` picks parts: keys actor, critic,
        optimizer and each extension's name, e.g. rnd (default: all). Returns whether the iteration counter should be
        restored (a full resume)."""
        state = loaded_dict
        cfg = {"actor": True, "critic": True, "optimizer": True, **dict.fromkeys((e.name for e in self.extensions), True),
               **(load_cfg or {})}
        if cfg["actor"]:
            self.actor.load_state_dict(state["actor_state_dict"], strict=strict)
        if cfg["critic"] and "critic_state_dict" in state:
            self.critic.load_state_dict(state["critic_state_dict"], strict=strict)
        if cfg["optimizer"] and "optimizer_state_dict" in state:
            self.optimizer.load_state_dict(state["optimizer_state_dict"])
            self.learning_rate = float(state.get("learning_rate", self.optimizer.param_groups[0]["lr"]))
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate
        if self.reward_normalizer is not None and "reward_normalizer_state_dict" in state:
            self.reward_normalizer.load_state_dict(state["reward_normalizer_state_dict"])
        for ext in self.extensions:
            if cfg[ext.name]:
                ext.load(state)
        return all(cfg.values())

    def compile(self, mode: str | None = None) -> None:
        """``torch.compile`` the actor's and critic's MLP heads in place (``None``: nothing to do); see
        :func:`rlcore.utils.compile.compile_mlp_heads`."""
        compile_mlp_heads((self.actor, self.critic), mode)

    def broadcast_parameters(self) -> None:
        """Copy rank 0's parameters and buffers (observation and reward normalisers included) to every rank.

        The reward normalisers' running discounted returns are per env, hence per rank, and stay local.
        """
        modules = [self.actor, self.critic, self.reward_normalizer,
                   *(m for ext in self.extensions for m in ext.broadcast_modules())]
        broadcast_tensors(t for m in modules if m is not None for k, t in m.state_dict().items()
                          if not k.endswith("disc_return"))

    def reduce_parameters(self) -> None:
        """Average gradients over ranks (called after backward in distributed runs)."""
        all_reduce_mean_grads(self._params(), self.grad_reduce_bucket_mb)

    # ====================================================================== factory
    @staticmethod
    def construct_algorithm(obs: TensorDict, env: VecEnv, cfg: dict, device: str) -> PPO:
        """Build actor, critic, storage and extensions from the nested train config (see factory.py)."""
        return construct_ppo(obs, env, cfg, device)


def _check_settings(actor: MLPModel, schedule: str) -> None:
    """Refuse an unknown learning-rate schedule and a deterministic actor (PPO needs log-probabilities)."""
    if schedule not in ("adaptive", "fixed"):
        raise ConfigError(f"Unknown PPO schedule '{schedule}'. Valid: adaptive, fixed.")
    if actor.distribution is None:
        raise ConfigError("PPO's actor needs a distribution_cfg (a stochastic policy).")


def _normalize(x: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit std over all elements: ``(x - mean) / (std + 1e-8)``.

    Distributed: mean and std are those of all ranks' elements together (merged around the global mean in
    float64, see :func:`pooled_moments`), so the advantages of all ranks jointly have mean 0 and std 1.
    """
    if is_distributed():
        mean, var, n = pooled_moments(x.reshape(-1, 1))
        std = (var * n / max(n - 1, 1)).sqrt()  # unbiased, like torch.std in a single process
        return ((x.double() - mean) / (std + 1e-8)).to(x.dtype)
    return (x - x.mean()) / (x.std() + 1e-8)


def clip_grad_norm_per_model(models: Sequence[nn.Module | Sequence[nn.Parameter]], max_norm: float
                             ) -> list[torch.Tensor]:
    """Bound each model's gradient norm by ``max_norm`` separately (rsl_rl clips actor and critic this way).

    A "model" is a module or a list of parameters.

    Model ``m`` with gradient ``g_m`` (all its parameters) gets the factor ``c_m = min(1, max_norm / (||g_m|| +
    1e-6))``, the formula of ``torch.nn.utils.clip_grad_norm_``. A parameter shared by several models (a CNN
    encoder shared by actor and critic) is scaled once, by the smallest factor of the models holding it, so every
    model's norm ends within the bound and the result does not depend on the models' order. (rsl_rl calls
    ``clip_grad_norm_`` on each model in turn: a shared encoder is scaled twice, and the critic's norm is measured
    after the actor's clip.) Without sharing, both give the same gradients.

    Returns:
        The norms ``||g_m||`` before clipping (0-dim tensors, no host sync).
    """
    params = [[p for p in (m.parameters() if isinstance(m, nn.Module) else m) if p.grad is not None] for m in models]
    norms, factors = [], {}
    for group in params:
        if not group:
            norms.append(torch.zeros(()))
            continue
        norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad.detach()) for p in group]))
        coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
        norms.append(norm)
        for p in group:
            factors[p] = coef if p not in factors else torch.minimum(factors[p], coef)
    for p, coef in factors.items():
        p.grad.detach().mul_(coef.to(p.grad.dtype))
    return norms


def _zeros_like_state(state: HiddenState) -> HiddenState:
    """Zeros shaped like a recurrent state (a tensor, or an LSTM's ``(h, c)`` tuple)."""
    if isinstance(state, tuple):
        return tuple(torch.zeros_like(s) for s in state)  # type: ignore[return-value]
    return None if state is None else torch.zeros_like(state)


def _unique_params(*modules: nn.Module) -> list[nn.Parameter]:
    """Parameters of all modules, each once (shared sub-modules are not duplicated)."""
    seen: set[int] = set()
    out = []
    for p in chain.from_iterable(m.parameters() for m in modules):
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out
