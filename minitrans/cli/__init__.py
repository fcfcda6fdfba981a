"""The ``minitrans`` command line: one module per command, named after it.

    main.py          the parser, and errors turned into one line on stderr
    flags.py         what the commands share: argument types, --checkpoint, --seed, --device
    train.py         minitrans train (and resume_flags.py: what --resume may change)
    translate.py     minitrans translate, minitrans evaluate
    generate.py      minitrans generate, minitrans attention
    gradcheck.py     minitrans gradcheck
    doctor.py        minitrans doctor (and environment.py, gpu_environment.py, gpu_advice.py)
    text_input.py    sentences from the command line or standard input

Each command module has ``add_parsers(commands)``, which adds its
subcommands with the function that runs them; nothing below this package
imports it.
"""
