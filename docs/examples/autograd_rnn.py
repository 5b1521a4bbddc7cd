"""An Elman RNN for ckptbench's default backend, written with autograd.numpy.

ckptbench run --model docs/examples/autograd_rnn.py:make --steps 200 --snaps 10
"""

import autograd.numpy as np


class ElmanRNN:
    def __init__(self, hidden=64, batch=8, input=16, output=1):
        self.hidden, self.batch, self.input, self.output = hidden, batch, input, output

    def init(self, steps, rng):
        h, i, o = self.hidden, self.input, self.output
        params = {
            "W": rng.standard_normal((h, h)) / np.sqrt(h),
            "U": rng.standard_normal((i, h)) / np.sqrt(i),
            "b": np.zeros(h),
            "V": rng.standard_normal((h, o)) / np.sqrt(h),
        }
        state0 = np.zeros((self.batch, h))
        inputs = rng.standard_normal((steps, self.batch, i))  # one input per step
        return params, state0, inputs

    def step(self, params, state, x):
        return np.tanh(state @ params["W"] + x @ params["U"] + params["b"])

    def post(self, params, state):
        return state @ params["V"]  # this step's output

    def loss(self, outputs):  # outputs: every step's output, stacked on a leading axis
        return np.mean(outputs**2)


def make(hidden=64, batch=8, input=16, output=1):
    return ElmanRNN(hidden, batch, input, output)
