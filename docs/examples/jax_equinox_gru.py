"""A GRU for the JAX backend, written with equinox: the params are an equinox module.

ckptbench run --backend jax --model docs/examples/jax_equinox_gru.py:make --steps 200 --snaps 10
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


class GRUModel(eqx.Module):
    cell: eqx.nn.GRUCell
    readout: eqx.nn.Linear


class GRU:
    def __init__(self, hidden=64, batch=8, input=16, output=1):
        self.hidden, self.batch, self.input, self.output = hidden, batch, input, output

    def init(self, steps, rng):
        cell_key, readout_key = jax.random.split(jax.random.PRNGKey(int(rng.integers(2**31))))
        model = GRUModel(
            eqx.nn.GRUCell(self.input, self.hidden, key=cell_key),
            eqx.nn.Linear(self.hidden, self.output, key=readout_key),
        )
        state0 = np.zeros((self.batch, self.hidden))
        inputs = rng.standard_normal((steps, self.batch, self.input))
        return model, state0, inputs

    def step(self, model, state, x):
        return jax.vmap(model.cell)(x, state)  # equinox cells take one example: vmap the batch

    def post(self, model, state):
        return jax.vmap(model.readout)(state)

    def loss(self, outputs):
        return jnp.mean(outputs**2)


def make(hidden=64, batch=8, input=16, output=1):
    return GRU(hidden, batch, input, output)
