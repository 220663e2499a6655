"""A PyTorch training script over the image example's JPEG files, written the
way training scripts usually are: a Dataset, a torchvision Compose, a
DataLoader with num_workers=0, and a training step. The step is GPU-free: it
sleeps for --step-ms, as the host does while a GPU computes. pipetune records
and tunes it without a change (README.md beside this file):

    pipetune profile --trace out/train.trace -- /usr/bin/python3 examples/pytorch/train.py

With --gpu (a machine with an NVIDIA GPU and a CUDA build of torch) the step
is real: each batch is copied to the GPU and a small convolutional network
trains on it, and `pipetune report` then says how much of the loop the GPU
waited for the DataLoader (docs/gpu.md, "PyTorch").
"""
import argparse
import glob
import os
import sys
import time

import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms


class JpegFolder(Dataset):
    def __init__(self, root, transform=None, limit=None):
        self.files = sorted(glob.glob(os.path.join(root, "*.jpg")))[:limit]
        if not self.files:
            sys.exit("no JPEG files in %s: generate them first (examples/image/README.md)" % root)
        self.transform = transform

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        with open(self.files[index], "rb") as f:
            image = Image.open(f).convert("RGB")
        if self.transform is not None:
            image = self.transform(image)
        return image, index % 10


def gpu_step():
    """A training step on the GPU: copy the batch over, forward, backward,
    update; synchronised, so the loop's time between batches is the GPU's."""
    device = torch.device("cuda")
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 32, 3, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3, stride=2), torch.nn.ReLU(),
        torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch, labels):
        batch, labels = batch.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        optimizer.zero_grad()
        torch.nn.functional.cross_entropy(model(batch), labels).backward()
        optimizer.step()
        torch.cuda.synchronize()
    return step


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=os.path.join(here, "..", "image", "data"))
    parser.add_argument("--images", type=int, default=1024, help="images per epoch")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=40.0, help="the fake training step")
    parser.add_argument("--gpu", action="store_true", help="train a small network on the GPU instead")
    args = parser.parse_args()
    if args.gpu and not torch.cuda.is_available():
        sys.exit("--gpu: torch finds no CUDA device (torch.cuda.is_available() is False)")
    torch.set_num_threads(1)

    transform = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    dataset = JpegFolder(args.data, transform, limit=args.images)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True, num_workers=0)

    step = gpu_step() if args.gpu else None
    begin = time.monotonic()
    images = 0
    for epoch in range(args.epochs):
        for batch, labels in loader:
            if step is not None:
                step(batch, labels)
            else:
                time.sleep(args.step_ms / 1000.0)  # the "GPU" computes; the host waits
            images += batch.shape[0]
    seconds = time.monotonic() - begin
    print("images/s: %.1f (%d images in %.2f s)" % (images / seconds, images, seconds))


if __name__ == "__main__":
    main()
