"""A small CNN trained on the CPU with torch's intra-op threads at their
default, for the step-threads test (test_step_threads.py) and benchmark
(bench/pytorch/step_threads.py). Each writes a training script that
imports this file, so that the step the test judges is the step the
benchmark measures."""
import resource
import time

import torch


def small_cnn(channels, size):
    """3x3 convolutions with `channels` outputs each, a 2x2 max-pool after
    every one but the first, then a linear layer to 10 classes, for
    `size` x `size` inputs of 3 channels."""
    layers, width, side = [], 3, size
    for i, out in enumerate(channels):
        layers += [torch.nn.Conv2d(width, out, 3, padding=1), torch.nn.ReLU()]
        if i > 0:
            layers.append(torch.nn.MaxPool2d(2))
            side //= 2
        width = out
    layers += [torch.nn.Flatten(), torch.nn.Linear(width * side * side, 10)]
    return torch.nn.Sequential(*layers)


def train(model, loader):
    """One pass of SGD (lr 0.01) over `loader`. Returns the pass's wall
    seconds, the process's CPU seconds over it (every thread: the step's
    intra-op threads too) and the calling thread's alone."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    usage, thread, start = resource.getrusage(resource.RUSAGE_SELF), time.thread_time(), time.monotonic()
    for x, y in loader:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    wall = time.monotonic() - start
    end = resource.getrusage(resource.RUSAGE_SELF)
    process = end.ru_utime + end.ru_stime - usage.ru_utime - usage.ru_stime
    return wall, process, time.thread_time() - thread
