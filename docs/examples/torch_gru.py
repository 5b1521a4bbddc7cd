"""A GRU written the usual PyTorch way: an nn.Module that computes with its own parameters.

ckptbench run --backend torch --model docs/examples/torch_gru.py:make --steps 200 --snaps 10
"""

import torch
from torch import nn


class GRUModel(nn.Module):
    def __init__(self, input, hidden, output):
        super().__init__()
        self.cell = nn.GRUCell(input, hidden)
        self.readout = nn.Linear(hidden, output)


class GRU:
    def __init__(self, hidden=64, batch=8, input=16, output=1):
        self.hidden, self.batch, self.input = hidden, batch, input
        self.model = GRUModel(input, hidden, output).double()

    def init(self, steps, rng):
        params = list(self.model.parameters())  # what ckptbench differentiates
        state0 = torch.zeros(self.batch, self.hidden, dtype=torch.float64)
        inputs = torch.from_numpy(rng.standard_normal((steps, self.batch, self.input)))
        return params, state0, inputs

    def step(self, params, state, x):
        return self.model.cell(x, state)  # the module's own parameters, as usual

    def post(self, params, state):
        return self.model.readout(state)

    def loss(self, outputs):
        return outputs.pow(2).mean()


def make(hidden=64, batch=8, input=16, output=1):
    return GRU(hidden, batch, input, output)
