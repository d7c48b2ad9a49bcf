"""Models: observation groups -> get_latent -> MLP head -> optional distribution."""

from rlcore.models.cnn_model import CNNModel
from rlcore.models.mlp_model import MLPModel, StateEstimator, select_obs_groups
from rlcore.models.rnn_model import RNNModel

MODELS = {"MLPModel": MLPModel, "CNNModel": CNNModel, "RNNModel": RNNModel}

__all__ = ["MODELS", "CNNModel", "MLPModel", "RNNModel", "StateEstimator", "select_obs_groups"]
