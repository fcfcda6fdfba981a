"""``minitrans translate`` and ``minitrans evaluate``: use a trained
encoder-decoder checkpoint."""

from minitrans.tools import arguments, text_input


def add_translate_parser(commands):
    translate = commands.add_parser(
        "translate", help="translate text with a trained encoder-decoder checkpoint",
        description="Translate a sentence, or every line of standard input, with an "
        "encoder-decoder checkpoint (for a decoder-only one: minitrans generate).",
        formatter_class=arguments.HelpFormatter,
    )
    translate.add_argument("--checkpoint", required=True,
                           help="an encoder-decoder checkpoint (required)")
    translate.add_argument(
        "text", nargs="?", help="a sentence (default: every line of standard input)"
    )
    translate.add_argument(
        "--beam", type=arguments.positive_int, default=1, help="beam width (default 1: greedy)"
    )
    arguments.add_device(translate)


def add_evaluate_parser(commands):
    evaluate = commands.add_parser(
        "evaluate", help="exact match and BLEU of a checkpoint on a TSV file",
        description="Decode the sources of a TSV file greedily and print the exact match and "
        "BLEU against its targets.",
        formatter_class=arguments.HelpFormatter,
    )
    evaluate.add_argument("--checkpoint", required=True, help="a trained checkpoint (required)")
    evaluate.add_argument("--data", required=True,
                          help="test pairs, one 'source<TAB>target' per line, UTF-8 (required)")
    arguments.add_device(evaluate)


def translate(args):
    from minitrans.training import evaluation, experiment

    arguments.use_device(args)
    model, task = experiment.load_trained(args.checkpoint)
    if task.kind == "lm":
        raise ValueError(f"--checkpoint: {args.checkpoint} holds a decoder-only model; use "
                         "'minitrans generate' to continue a prompt with it")
    lines = [args.text] if args.text is not None else text_input.input_lines()
    for text in lines:
        if not text.strip():
            print()
            continue
        ids = evaluation.predict(model, task, [text], beam_size=args.beam)[0]
        print(task.tokenizer.join(task.vocab.decode(ids)))
    return 0


def evaluate(args):
    from minitrans.data import read_tsv
    from minitrans.training import evaluation, experiment

    arguments.use_device(args)
    model, task = experiment.load_trained(args.checkpoint)
    pairs = read_tsv(args.data)
    accuracy, predictions = evaluation.exact_match(model, task, pairs)
    references = [task.tokenizer.join(task.tokenizer.split(target)) for _, target in pairs]
    print(f"{len(pairs)} pairs from {args.data}")
    print(f"exact match: {accuracy:.1%}")
    print(f"BLEU: {evaluation.corpus_bleu(predictions, references):.2f}")
    return 0
