"""The course's kit, beside the library: what the lessons in ``lessons/``
use and the library does not.

    exercises*.py, exercise_checker.py, exercise_cases.py, exercise_references.py,
    modern_references.py, exercise_verdict.py
                        the exercise checkers, the cases they try, the slow
                        references they compare with, and how a verdict is
                        shown (in a notebook, its hint folded)
    diagrams.py, diagram_flows.py, diagram_shapes.py
                        Figure 1 and its close-ups, drawn from a ModelConfig
    interactive.py, interactive_figures.py, interactive_script.py
                        the lessons' slider figures
    path_lengths.py     Table 1 of the paper, measured
    course_prose.py     the lessons' prose as one text, to train a small GPT on

It imports ``minitrans`` like any learner's code does; ``minitrans`` never
imports it (tests/library/test_layout.py fails if it does), so the library
reads, installs and runs without its course.
"""
