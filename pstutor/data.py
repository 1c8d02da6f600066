"""Small, deterministic toy data, so every run of a notebook sees the same examples."""

from __future__ import annotations

import numpy as np


def toy_classification(
    num_examples: int = 1024, num_features: int = 8, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Features and 0/1 labels from a fixed linear rule plus noise (learnable, not trivial)."""
    if num_examples < 1 or num_features < 1:
        raise ValueError("num_examples and num_features must be positive")
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(num_examples, num_features)).astype("float32")
    weights = np.linspace(-1.0, 1.0, num_features, dtype="float32")
    noise = rng.normal(scale=0.5, size=num_examples).astype("float32")
    y = (x @ weights + noise > 0).astype("float32")
    return x, y


WORDS = ("river", "mountain", "forest", "desert", "ocean", "valley", "glacier")


def toy_words(num_examples: int = 200, seed: int = 0) -> dict[str, list[list[str]]]:
    """Examples of three distinct words each; the label is "yes" when "ocean" is among them."""
    if num_examples < 1:
        raise ValueError("num_examples must be positive")
    rng = np.random.default_rng(seed)
    features = [[str(w) for w in rng.choice(WORDS, size=3, replace=False)] for _ in range(num_examples)]
    labels = [["yes"] if "ocean" in words else ["no"] for words in features]
    return {"features": features, "label": labels}
