"""A small model with the layer kinds whose gradients users check first (convolution,
batch norm, embedding, linear), and seeded data, shared by the examples, the machine check and
the tests, so that all of them exercise the same thing."""
import torch
import torch.nn as nn


class SmallNet(nn.Module):
    """Image + token input: conv -> batchnorm -> relu -> pool, embedding bag, linear head."""

    def __init__(self, num_classes=10, vocab=50):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.embedding = nn.Embedding(vocab, 8)
        self.head = nn.Linear(8 * 4 * 4 + 8, num_classes)

    def forward(self, images, tokens):
        x = torch.relu(self.bn(self.conv(images)))
        x = nn.functional.adaptive_avg_pool2d(x, 4).flatten(1)
        t = self.embedding(tokens).mean(dim=1)
        return self.head(torch.cat([x, t], dim=1))


def make_model(seed=0, device="cpu"):
    """The same initial weights on every rank (a common seed)."""
    torch.manual_seed(seed)
    return SmallNet().to(device)


def make_batch(rank, step, batch_size=8, device="cpu", vocab=50):
    """Different data on every rank and step (seeded by both), reproducible across runs."""
    g = torch.Generator().manual_seed(1000 * rank + step)
    images = torch.randn(batch_size, 3, 8, 8, generator=g)
    tokens = torch.randint(0, vocab, (batch_size, 5), generator=g)
    labels = torch.randint(0, 10, (batch_size,), generator=g)
    return images.to(device), tokens.to(device), labels.to(device)


def grad_means(model):
    """Mean gradient of every parameter, by name (the number users print per layer)."""
    return {name: p.grad.detach().double().mean().item()
            for name, p in model.named_parameters() if p.grad is not None}
