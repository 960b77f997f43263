"""An example plug-in domain: a grid warehouse with its own robot API.

It shares nothing with RoboSim; it exists to show (and test) that densecode's
simulator plug-in path works for any gymnasium environment. The program API,
bound in `configs/warehouse.yaml`:

    move(direction)   # "north" | "south" | "east" | "west"; walls are errors
    scan() -> str | None   # the item on the current cell
    grab()            # take the item here (hands must be empty)
    drop()            # put the held item here; at the packing station it ships
    position() -> [x, y]
    holding() -> str | None

Actions are `{"op": int, "arg": str}` with op indexing `OPS`; `info["result"]`
is the call's value, `info["error"]` a failed call's reason. The last op,
"finish", rewards 1.0 when the order's item was shipped.
"""

from __future__ import annotations

import hashlib
import random
import string

import gymnasium as gym
import numpy as np
from gymnasium import spaces

OPS = ("move", "scan", "grab", "drop", "position", "holding", "finish")
DIRECTIONS = {"north": (0, -1), "south": (0, 1), "east": (1, 0), "west": (-1, 0)}
ITEMS = ["bolts", "gloves", "helmet", "cable", "battery", "drill", "tape", "lamp", "rope", "valve"]
_CHARS = string.ascii_letters + string.digits + " _-"


class WarehouseEnv(gym.Env):
    metadata = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(self, width: int = 6, height: int = 5, render_mode: str | None = None):
        self.width, self.height = width, height
        self.render_mode = render_mode
        self.action_space = spaces.Dict({"op": spaces.Discrete(len(OPS)), "arg": spaces.Text(16, min_length=0, charset=_CHARS)})
        self.observation_space = spaces.Dict({
            "position": spaces.MultiDiscrete([width, height]),
            "holding": spaces.Text(16, min_length=0, charset=_CHARS),
        })
        self.pos = [0, 0]
        self.shelves: dict[tuple[int, int], str] = {}
        self.station = (0, 0)
        self.order = ""
        self.held: str | None = None
        self.shipped: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        layout = (options or {}).get("layout") or random_layout(self.np_random, self.width, self.height)
        self.pos = list(layout["start"])
        self.station = tuple(layout["station"])
        self.shelves = {tuple(cell): item for cell, item in layout["shelves"]}
        self.order = layout["order"]
        self.held, self.shipped = None, []
        return self._obs(), {"layout": layout}

    def step(self, action: dict):
        op = OPS[int(action["op"])]
        arg = action.get("arg", "")
        info = {"op": op, "result": None, "error": None}
        reward, terminated = 0.0, False
        here = tuple(self.pos)
        if op == "move":
            if arg not in DIRECTIONS:
                info["error"] = f"unknown direction {arg!r}; use north, south, east or west"
            else:
                x, y = self.pos[0] + DIRECTIONS[arg][0], self.pos[1] + DIRECTIONS[arg][1]
                if not (0 <= x < self.width and 0 <= y < self.height):
                    info["error"] = f"bumped into the wall moving {arg} from {self.pos}"
                else:
                    self.pos = [x, y]
        elif op == "scan":
            info["result"] = self.shelves.get(here)
        elif op == "grab":
            if self.held is not None:
                info["error"] = f"already holding {self.held}"
            elif here not in self.shelves:
                info["error"] = f"nothing to grab at {list(here)}"
            else:
                self.held = self.shelves.pop(here)
        elif op == "drop":
            if self.held is None:
                info["error"] = "not holding anything"
            elif here == self.station:
                self.shipped.append(self.held)
                self.held = None
            elif here in self.shelves:
                info["error"] = f"the shelf at {list(here)} is full"
            else:
                self.shelves[here], self.held = self.held, None
        elif op == "position":
            info["result"] = list(self.pos)
        elif op == "holding":
            info["result"] = self.held
        else:  # finish
            reward = 1.0 if self.order in self.shipped else 0.0
            terminated = True
        if info["error"]:
            terminated = True
        return self._obs(), reward, terminated, False, info

    def _obs(self) -> dict:
        return {"position": np.array(self.pos, dtype=np.int64), "holding": self.held or ""}

    def render(self):
        return f"robot at {self.pos}, holding {self.held!r}, shipped {self.shipped}"


def random_layout(rng, width: int, height: int) -> dict:
    cells = [(x, y) for x in range(width) for y in range(height)]
    order = [cells[i] for i in rng.permutation(len(cells))]
    start, station, shelf_cells = order[0], order[1], order[2:6]
    items = [ITEMS[i] for i in rng.permutation(len(ITEMS))[:4]]
    return {"start": list(start), "station": list(station), "shelves": [[list(c), it] for c, it in zip(shelf_cells, items)],
            "order": items[0]}


# ----------------------------------------------------------------- tasks


def _moves(dx: int, dy: int) -> list[str]:
    lines = []
    for delta, pos, neg in ((dx, "east", "west"), (dy, "south", "north")):
        if delta:
            lines += [f"    for _ in range({abs(delta)}):", f'        move("{pos if delta > 0 else neg}")']
    return lines


def _fetch(rng: random.Random, width: int, height: int) -> dict:
    cells = rng.sample([(x, y) for x in range(width) for y in range(height)], 4)
    start, station, target, other = cells
    item, spare = rng.sample(ITEMS, 2)
    instruction = rng.choice([
        "Fetch the {item} from the shelf at ({x}, {y}) and drop it at the packing station at ({sx}, {sy}).",
        "Ship the {item}: it is on the shelf at ({x}, {y}); the packing station is at ({sx}, {sy}).",
    ]).format(item=item, x=target[0], y=target[1], sx=station[0], sy=station[1])
    body = _moves(target[0] - start[0], target[1] - start[1]) + ["    grab()"]
    body += _moves(station[0] - target[0], station[1] - target[1]) + ["    drop()"]
    layout = {"start": list(start), "station": list(station), "order": item,
              "shelves": [[list(target), item], [list(other), spare]]}
    return {"family": "fetch", "instruction": instruction, "reference": "\n".join(body) + "\n",
            "reset_options": {"layout": layout}}


def _search_row(rng: random.Random, width: int, height: int) -> dict:
    y = rng.randrange(height)
    xs = rng.sample(range(width), 2)
    item, spare = rng.sample(ITEMS, 2)
    station = (rng.randrange(width), rng.randrange(height))
    while station[1] == y and station[0] in xs:
        station = (rng.randrange(width), rng.randrange(height))
    start = (0, y)
    instruction = rng.choice([
        "The {item} is somewhere in row {y}. Starting from the west end, find it and ship it at the station ({sx}, {sy}).",
        "Scan row {y} from west to east for the {item}, then bring it to the packing station at ({sx}, {sy}).",
    ]).format(item=item, y=y, sx=station[0], sy=station[1])
    body = [
        f'    while scan() != "{item}":',
        '        move("east")',
        "    grab()",
        f"    while position()[0] < {station[0]}:",
        '        move("east")',
        f"    while position()[0] > {station[0]}:",
        '        move("west")',
        f"    while position()[1] < {station[1]}:",
        '        move("south")',
        f"    while position()[1] > {station[1]}:",
        '        move("north")',
        "    drop()",
    ]
    layout = {"start": list(start), "station": list(station), "order": item,
              "shelves": [[[xs[0], y], item], [[xs[1], y], spare]]}
    return {"family": "search_row", "instruction": instruction, "reference": "\n".join(body) + "\n",
            "reset_options": {"layout": layout}}


def generate_tasks(split: str = "train", n: int | None = None, seed: int = 0, width: int = 6, height: int = 5) -> list[dict]:
    """Warehouse tasks; splits disjoint by a hash of the instruction (test 10%, validation 10%)."""
    buckets = {"test": range(0, 10), "validation": range(10, 20), "train": range(20, 100)}
    if split not in buckets:
        raise ValueError(f"unknown split {split!r}; choose train, validation or test")
    n = {"train": 1000, "validation": 50, "test": 100}[split] if n is None else n
    rng = random.Random(f"warehouse-{split}-{seed}")
    tasks, seen = [], set()
    makers = (_fetch, _search_row)
    while len(tasks) < n:
        task = makers[len(tasks) % 2](rng, width, height)
        bucket = int(hashlib.sha256(task["instruction"].encode()).hexdigest()[:8], 16) % 100
        if bucket not in buckets[split] or task["instruction"] in seen:
            continue
        seen.add(task["instruction"])
        task["task_id"] = f"warehouse-{split}-{seed}-{len(tasks):05d}"
        task["prompt"] = "# Instruction: " + task["instruction"] + "\ndef task_program():\n"
        task["split"] = split
        tasks.append(task)
    return tasks
