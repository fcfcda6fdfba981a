"""``minitrans translate`` and ``minitrans evaluate``: use a trained
encoder-decoder checkpoint."""

from minitrans.tools import arguments, text_input


def add_translate_parser(commands):
    translate = commands.add_parser("translate", help="translate text with a trained checkpoint")
    translate.add_argument("--checkpoint", required=True)
    translate.add_argument(
        "text", nargs="?", help="a sentence (default: every line of standard input)"
    )
    translate.add_argument(
        "--beam", type=arguments.positive_int, default=1, help="beam width (default 1: greedy)"
    )
    translate.add_argument("--device", choices=["cpu", "gpu"], default="cpu")


def add_evaluate_parser(commands):
    evaluate = commands.add_parser(
        "evaluate", help="exact match and BLEU of a checkpoint on a TSV file"
    )
    evaluate.add_argument("--checkpoint", required=True)
    evaluate.add_argument("--data", required=True)
    evaluate.add_argument("--device", choices=["cpu", "gpu"], default="cpu")


def translate(args):
    from minitrans.training import evaluation, experiment

    arguments.use_device(args)
    model, task = experiment.load_trained(args.checkpoint)
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
