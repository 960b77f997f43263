"""A small elevator simulator and its task generator: a complete densecode plug-in (see elevator.yaml).

The program drives one elevator car through this API (bound in elevator.yaml):

    go_to(floor)        # move the car; the doors must be closed
    open_doors(); close_doors()
    pick_up(name)       # a passenger waiting on this floor boards (doors open)
    drop_off(name)      # a riding passenger leaves on this floor (doors open)
    floor() -> int      # the car's floor
    waiting() -> list   # names waiting on this floor
    riding() -> list    # names in the car

The env knows nothing of densecode: an action is {"op", "floor", "name"}; info["result"] is the call's value and
info["error"] the reason a call failed (both always present, None when unused). A bad argument is reported through
info["error"], never by raising. The last op, "finish", rewards 1.0 when every passenger is at their destination
(and, for a task with a goal floor, the car is there with its doors open).
"""

from __future__ import annotations

import hashlib
import random
import string

import gymnasium as gym
from gymnasium import spaces

OPS = ("go_to", "open_doors", "close_doors", "pick_up", "drop_off", "floor", "waiting", "riding", "finish")
NAMES = ["Ana", "Ben", "Chloe", "Dev", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kai", "Lea"]


class ElevatorEnv(gym.Env):
    metadata = {"render_modes": []}  # noqa: RUF012 - gymnasium's class attribute

    def __init__(self, floors: int = 8):
        self.floors = floors
        self.action_space = spaces.Dict({"op": spaces.Discrete(len(OPS)), "floor": spaces.Discrete(floors),
                                         "name": spaces.Text(16, min_length=0, charset=string.ascii_letters)})
        self.observation_space = spaces.Dict({"floor": spaces.Discrete(floors), "doors_open": spaces.Discrete(2)})
        self.car, self.doors_open = 0, False
        self.waiting: dict[str, list] = {}  # name -> [floor, destination]
        self.riding: dict[str, int] = {}  # name -> destination
        self.arrived: dict[str, tuple[int, int]] = {}  # name -> (floor left on, destination)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        options = options or {}
        passengers = options.get("passengers")
        if passengers is None:  # a random building (gymnasium's env checker resets without options)
            names = self.np_random.choice(NAMES, size=2, replace=False)
            passengers = [[str(n), int(self.np_random.integers(self.floors)), int(self.np_random.integers(self.floors))]
                          for n in names]
        self.car, self.doors_open = int(options.get("start", 0)), False
        self.goal = options.get("goal_floor")  # where the car must end, doors open (None: anywhere)
        self.waiting = {name: [start, dest] for name, start, dest in passengers}
        self.riding, self.arrived = {}, {}
        return self._obs(), {}

    def step(self, action: dict):
        op, floor, name = OPS[int(action["op"])], action.get("floor"), action.get("name")
        info = {"op": op, "result": None, "error": None}
        reward, terminated = 0.0, False
        if op == "go_to":
            if not isinstance(floor, int) or not 0 <= floor < self.floors:
                info["error"] = f"there is no floor {floor!r}; floors are 0 to {self.floors - 1}"
            elif self.doors_open:
                info["error"] = "cannot move with the doors open; call close_doors() first"
            else:
                self.car = floor
        elif op in ("open_doors", "close_doors"):
            self.doors_open = op == "open_doors"
        elif op in ("pick_up", "drop_off"):
            info["error"] = self._board(name) if op == "pick_up" else self._alight(name)
        elif op == "floor":
            info["result"] = self.car
        elif op == "waiting":
            info["result"] = sorted(n for n, (at, _) in self.waiting.items() if at == self.car)
        elif op == "riding":
            info["result"] = sorted(self.riding)
        else:  # finish
            done = not self.waiting and not self.riding and all(at == to for at, to in self.arrived.values())
            done = done and (self.goal is None or (self.car == self.goal and self.doors_open))
            reward, terminated = (1.0 if done else 0.0), True
        return self._obs(), reward, terminated or bool(info["error"]), False, info

    def _board(self, name) -> str | None:
        if not self.doors_open:
            return "the doors are closed; call open_doors() first"
        if self.waiting.get(name, [None])[0] != self.car:
            return f"nobody called {name!r} is waiting on floor {self.car} (waiting here: {self._here()})"
        self.riding[name] = self.waiting.pop(name)[1]
        return None

    def _alight(self, name) -> str | None:
        if not self.doors_open:
            return "the doors are closed; call open_doors() first"
        if name not in self.riding:
            return f"{name!r} is not in the car (riding: {sorted(self.riding)})"
        self.arrived[name] = (self.car, self.riding.pop(name))
        return None

    def _here(self) -> list[str]:
        return sorted(n for n, (at, _) in self.waiting.items() if at == self.car)

    def _obs(self) -> dict:
        return {"floor": self.car, "doors_open": int(self.doors_open)}


# ----------------------------------------------------------------- tasks


def _ride(rng: random.Random, floors: int) -> dict:
    name = rng.choice(NAMES)
    start, dest = rng.sample(range(floors), 2)
    instruction = rng.choice(["Take {n} from floor {a} to floor {b}.",
                              "{n} is waiting on floor {a} and wants to go to floor {b}."]).format(n=name, a=start, b=dest)
    body = [f"go_to({start})", "open_doors()", f'pick_up("{name}")', "close_doors()", f"go_to({dest})",
            "open_doors()", f'drop_off("{name}")']
    return {"instruction": instruction, "body": body, "passengers": [[name, start, dest]]}


def _gather(rng: random.Random, floors: int) -> dict:
    start = rng.randrange(1, floors)
    names = rng.sample(NAMES, rng.randint(2, 3))
    instruction = rng.choice(["Everyone waiting on floor {a} wants to go down to the lobby (floor 0).",
                              "Bring all the people waiting on floor {a} to floor 0."]).format(a=start)
    body = [f"go_to({start})", "open_doors()", "for name in waiting():", "    pick_up(name)", "close_doors()",
            "go_to(0)", "open_doors()", "for name in riding():", "    drop_off(name)"]
    return {"instruction": instruction, "body": body, "passengers": [[n, start, 0] for n in names]}


def _summon(rng: random.Random, floors: int) -> dict:
    goal = rng.randrange(floors)
    instruction = rng.choice(["Someone pressed the call button on floor {a}: bring the car there and open the doors.",
                              "Send the elevator to floor {a} and open its doors."]).format(a=goal)
    body = [f"if floor() != {goal}:", f"    go_to({goal})", "open_doors()"]
    return {"instruction": instruction, "body": body, "passengers": [], "goal_floor": goal}


def generate_tasks(split: str, n: int, seed: int, floors: int = 8) -> list[dict]:
    """`n` elevator tasks of `split`; the splits are disjoint by a hash of the instruction (test 10%)."""
    buckets = {"test": range(10), "validation": range(10, 20), "train": range(20, 100)}
    if split not in buckets:
        raise ValueError(f"unknown split {split!r}; choose train, validation or test")
    rng = random.Random(f"elevator-{split}-{seed}")
    tasks: list[dict] = []
    for attempt in range(1000 * max(n, 1)):
        if len(tasks) == n:
            break
        made = (_ride, _gather, _summon)[attempt % 3](rng, floors)
        if int(hashlib.sha256(made["instruction"].encode()).hexdigest()[:8], 16) % 100 not in buckets[split]:
            continue
        tasks.append({
            "task_id": f"elevator-{split}-{seed}-{len(tasks):04d}",
            "instruction": made["instruction"],
            "reference": "".join(f"    {line}\n" for line in made["body"]),  # the body of def task_program():
            "reset_options": {"passengers": made["passengers"], "start": rng.randrange(floors),
                              "goal_floor": made.get("goal_floor")},
            "seed": seed,
        })
    return tasks
