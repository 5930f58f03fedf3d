"""What every config model shares: the error type, the frozen strict base model, and the
split-fraction check."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfigError", "Frozen", "check_fracs"]


class ConfigError(ValueError):
    """A configuration file or override is invalid; the message names the field."""


class Frozen(BaseModel):
    """A config section: immutable, and an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_fracs(train_frac: float, val_frac: float, where: str) -> None:
    """Refuse a train and a validation share that leave a negative test share."""
    if train_frac + val_frac > 1.0:
        raise ValueError(f"{where}train_frac={train_frac} + {where}val_frac={val_frac} = "
                         f"{train_frac + val_frac:g} > 1: the two must sum to at most 1 "
                         "(the rest is the test split)")
