"""The training loop the image examples share: minibatch SGD with a tqdm bar, evaluation in eval
mode, a stop with a message naming the step when the loss turns NaN, and the header line naming the
backend and device."""
import math
import sys
import time

import numpy as np

import gpublas


class NonFiniteLoss(RuntimeError):
    pass


def describe_device():
    info = gpublas.device_info()
    return f"backend: {gpublas.backend()} | device: {info.get('name', '?')}"


def batches(n, batch_size, rng=None):
    order = rng.permutation(n) if rng is not None else np.arange(n)
    for i in range(0, n, batch_size):
        yield order[i:i + batch_size]


def train_epoch(model, crit, opt, X, y, batch_size, rng, bar=None, step=0):
    """One pass over (X, y) in shuffled minibatches; returns (mean loss, steps done so far)."""
    model.train()
    total, count = 0.0, 0
    for idx in batches(len(X), batch_size, rng):
        loss = crit(model(X[idx]), y[idx])
        step += 1
        if not math.isfinite(loss):
            raise NonFiniteLoss(f"loss became {loss} at step {step}; stopping (try a smaller --lr)")
        opt.zero_grad()
        model.backward(crit.backward())
        opt.step()
        total += loss * len(idx)
        count += len(idx)
        if bar is not None:
            bar.set_postfix(loss=f"{loss:.4f}", refresh=False)
            bar.update(1)
    return total / max(count, 1), step


def accuracy(model, X, y, batch_size=256):
    """Fraction of correct argmax predictions, the model in eval mode."""
    model.eval()
    correct = 0
    for idx in batches(len(X), batch_size):
        logits = model(X[idx]).get()
        correct += int((logits.argmax(axis=1) == y[idx]).sum())
    model.train()
    return correct / max(len(X), 1)


def run(model, crit, opt, data, *, epochs, batch_size, seed, schedule=None, name="train", quiet=False,
        augment=None):
    """Trains for `epochs`, printing one line per epoch; returns a summary dict. `augment(X, rng)`, if
    given, makes each epoch's copy of the training images (host-side data loading)."""
    from tqdm import tqdm

    Xtr, ytr, Xte, yte = data
    rng = np.random.default_rng(seed)
    steps_per_epoch = math.ceil(len(Xtr) / batch_size)
    start = time.perf_counter()
    step = 0
    history = []
    with tqdm(total=epochs * steps_per_epoch, desc=name, unit="step", file=sys.stderr, disable=quiet) as bar:
        for epoch in range(1, epochs + 1):
            X = augment(Xtr, rng) if augment is not None else Xtr
            loss, step = train_epoch(model, crit, opt, X, ytr, batch_size, rng, bar, step)
            history.append(loss)
            if schedule is not None:
                schedule.step()
            bar.write(f"epoch {epoch:3d}  loss {loss:.4f}  lr {opt.lr:.4g}")
    train_s = time.perf_counter() - start
    acc = accuracy(model, Xte, yte)
    return {"test_accuracy": acc, "train_seconds": train_s, "seconds": time.perf_counter() - start,
            "final_loss": history[-1] if history else float("nan"), "losses": history, "steps": step}


def fit_and_report(name, net, opt, data, args, schedule=None, augment=None):
    """Trains a classifier with run(), saves it when args.save names a file, and prints the summary
    line; returns the process exit status (1 when the loss turned NaN or infinite)."""
    import nn  # the examples' own package; imported here so that nn's import does not load examples
    try:
        s = run(net, nn.SoftmaxCrossEntropy(), opt, data, epochs=args.epochs, batch_size=args.batch_size,
                seed=args.seed, schedule=schedule, name=name, quiet=args.quiet, augment=augment)
    except NonFiniteLoss as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    if args.save:
        nn.save(net, args.save)
    print(f"{name}: test accuracy {s['test_accuracy']:.4f} ({len(data[2])} images) after {args.epochs} epochs, "
          f"final train loss {s['final_loss']:.4f}, {s['seconds']:.1f} s")
    return 0
