"""The PyTorch reference scripts' reading of a configs file (bench/configs.json, or ../shared/bench/configs.json's
format): an entry's sizes over the script's built-in defaults, and its optimizer settings over the given ones, as
qkv bench reads the same entry."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_FILE = os.path.join(HERE, "configs.json")


def entry(path, name, defaults, optimizer):
    """(sizes, optimizer): copies of defaults and optimizer with the keys they share taken from entry `name`."""
    c, o = dict(defaults), dict(optimizer)
    if path and os.path.exists(path):
        with open(path) as f:
            e = json.load(f).get(name, {})
        c.update({k: v for k, v in e.items() if k in defaults})
        o.update({k: v for k, v in e.get("optimizer", {}).items() if k in optimizer})
    return c, o
