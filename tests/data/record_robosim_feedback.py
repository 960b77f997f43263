"""Record RoboSimBackend feedback on fixed programs: tests/data/robosim_feedback_golden.json.

Run once on the code from before the runner/backend moved into densecode.simulators (commit 3ac5611):
    git archive 3ac5611 | tar -x -C /tmp/old && cd /tmp/old && \
    PYTHONPATH=/tmp/old:/tmp/old/sim python <this file> <out.json>
tests/simulators/test_simulators_robosim.py checks that today's backend reproduces every value.
"""
import json, sys
from densecode_robosim import RoboSimBackend
from densecode_robosim.tasks import generate_tasks

tasks = [t.to_dict() for t in generate_tasks("test", n=12, seed=3)]
BROKEN = [
    "    go_to(\"nowhere at all\")\n",
    "    x = get_all_rooms()\n    go_to(x[99])\n",
    "    go_to(\"kitchen\"\n",
    "    while True:\n        is_in_room(\"apple\")\n",
    "    start = get_current_location()\n    say(\"hello\")\n    go_to(start)\n",
    "    pick(\"apple\")\n    place(\"banana\")\n",
]
programs, owners = [], []
for t in tasks:
    programs.append(t["reference"] if "def task_program" in t["reference"] else "def task_program():\n" + t["reference"])
    owners.append(tasks.index(t))
    for b in BROKEN:
        programs.append("def task_program():\n" + b)
        owners.append(tasks.index(t))
out = {}
for name, backend in {"concrete": RoboSimBackend(mode="concrete"), "dynamic": RoboSimBackend(mode="dynamic", n_runs=3),
                      "auto_partial": RoboSimBackend(clean_credit=0.1, check_credit=0.6, error_penalty=-0.5),
                      "training_default": RoboSimBackend(clean_credit=0.0, check_credit=0.5, error_penalty=-0.25)}.items():
    fbs = backend.evaluate(programs, [tasks[i] for i in owners])
    out[name] = [{"score": f.score, "line_penalties": [list(p) for p in f.line_penalties],
                  "info": {k: v for k, v in f.info.items() if k != "sim_s"}} for f in fbs]
json.dump({"tasks": tasks, "jobs": [[p, i] for p, i in zip(programs, owners)], "feedback": out},
          open(sys.argv[1], "w"), indent=None)
print("recorded", len(programs), "programs")
