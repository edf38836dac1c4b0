"""Rendering support: the policy checkpoints that a render reads (a policy's weights with
what rebuilds its env), written and read without running code.

Examples:
    >>> import tempfile, torch
    >>> from cadence.render import load_checkpoint, save_render_checkpoint
    >>> path = save_render_checkpoint(tempfile.mkdtemp() + "/policy.ckpt", torch.nn.Linear(2, 2),
    ...                               env_metadata={"env_name": "CartPole-v1"}, format="archive")
    >>> load_checkpoint(path)["env_name"]
    'CartPole-v1'
"""

from cadence.render.checkpoint import checkpoint_hash, infer_state_dict, load_checkpoint, save_render_checkpoint

__all__ = ["checkpoint_hash", "infer_state_dict", "load_checkpoint", "save_render_checkpoint"]
