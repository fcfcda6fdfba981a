"""``minitrans translate`` and ``minitrans evaluate``: use a trained
encoder-decoder checkpoint."""

from minitrans.cli import flags, text_input, text_model
from minitrans.data import UNK, read_tsv
from minitrans.data.tasks import TEXT
from minitrans.training.optimisation import evaluation
from minitrans.training import experiment


def add_parsers(commands):
    add_translate_parser(commands)
    add_evaluate_parser(commands)


def add_translate_parser(commands):
    translate = commands.add_parser(
        "translate", help="translate text with a trained encoder-decoder checkpoint",
        description="Translate a sentence, or every line of standard input, with an "
        "encoder-decoder checkpoint (for a decoder-only one: minitrans generate).",
        formatter_class=flags.HelpFormatter,
    )
    flags.add_checkpoint(translate, "an encoder-decoder")
    translate.add_argument(
        "text", nargs="?", help="a sentence (default: every line of standard input)"
    )
    translate.add_argument(
        "--beam", type=flags.positive_int, default=1, help="beam width (default 1: greedy)"
    )
    flags.add_device(translate)
    translate.set_defaults(run=run_translate)


def add_evaluate_parser(commands):
    evaluate = commands.add_parser(
        "evaluate", help="exact match and BLEU of a checkpoint on a TSV file (a text model: "
        "its loss on a text)",
        description="Decode the sources of a TSV file greedily and print the exact match and "
        "BLEU against its targets. With a model trained on a text (train text), --data is a "
        "UTF-8 text: print its mean cross-entropy in nats per token and bits per character "
        "over every full window of the model's positions.",
        formatter_class=flags.HelpFormatter,
    )
    flags.add_checkpoint(evaluate)
    evaluate.add_argument("--data", required=True,
                          help="test pairs, one 'source<TAB>target' per line, UTF-8; for a "
                          "text model, a UTF-8 text (required)")
    evaluate.add_argument("--show-errors", type=flags.non_negative_int, default=0, metavar="N",
                          help="list up to N wrong predictions beside their references (default 0)")
    flags.add_device(evaluate)
    evaluate.set_defaults(run=run_evaluate)


def run_translate(args):
    text_input.check_utf8("text", args.text)
    flags.use_device(args)
    model, task = experiment.load_trained(args.checkpoint)
    if task.kind == "lm":
        raise ValueError(f"--checkpoint: {args.checkpoint} holds a decoder-only model; use "
                         "'minitrans generate' to continue a prompt with it")
    lines = [args.text] if args.text is not None else text_input.input_lines()
    for text in lines:
        if not text.strip():
            print()
            continue
        text_input.warn_unknown(task, text)
        ids = evaluation.predict(model, task, [text], beam_size=args.beam)[0]
        print(task.tokenizer.join(task.vocab.decode(ids)))
    return 0


def run_evaluate(args):
    flags.use_device(args)
    model, task = experiment.load_trained(args.checkpoint)
    if task.name == TEXT:  # a model of a text: its loss over the text's windows
        return text_model.evaluate_text(args, model, task)
    pairs = read_tsv(args.data)
    accuracy, predictions = evaluation.exact_match(model, task, pairs)
    references = [evaluation.reference_text(task, target) for _, target in pairs]
    print(f"{len(pairs)} pairs from {args.data}")
    print(f"exact match: {accuracy:.1%}")
    tokenize = evaluation.bleu_tokenizer(references)
    bleu = evaluation.corpus_bleu(predictions, references, tokenize=tokenize)
    print(f"BLEU: {bleu:.2f} (sacrebleu, tokenize={tokenize})")
    wrong = [(source, prediction, reference)
             for (source, _), prediction, reference in zip(pairs, predictions, references)
             if prediction != reference or UNK in prediction]
    if args.show_errors:
        print(f"{min(len(wrong), args.show_errors)} of {len(wrong)} wrong predictions:")
    for source, prediction, reference in wrong[:args.show_errors]:
        print(f"  source     {source!r}\n  prediction {prediction!r}\n  reference  {reference!r}")
    return 0
