#!/usr/bin/env python3
"""TRL peer of docs/benchmarks.md ("Peers", real systems): Hugging Face TRL's own `GRPOTrainer` on the CPU,
on rlcpp's add3 task with rlcpp's GRPO recipe (configs/grpo_add3_benchmark.json), from an rlcpp checkpoint
(config.json + model.safetensors, loaded as transformers' LlamaForCausalLM). Run it with the peers' venv:

  build/peers/venv/bin/python bench/peers/trl_grpo.py step --checkpoint DIR
      [--prompts 64 --group 8 --new-tokens 6 --minibatches 2 --iters 3 --warmup 1 --threads 2 --seed 1]
  build/peers/venv/bin/python bench/peers/trl_grpo.py grpo-run --checkpoint DIR
      [--steps 200 --eval-every 20 --eval-size 1000 --out CURVE.jsonl --prompts 64 --group 8 --new-tokens 6
       --minibatches 2 --threads 2 --seed 1]
  both: [--lr 1e-4 --temperature 1.0 --clip 0.2 --max-grad-norm 1.0 --loss-type bnpo
         --gradient-checkpointing --whole-group-minibatches
         --lora-rank R --lora-alpha A --lora-targets q_proj,v_proj,...|all-linear]

--lora-rank R > 0 trains LoRA adapters through `peft` (GRPOTrainer's peft_config: LoraConfig(r=R, lora_alpha=A,
target_modules, lora_dropout=0)), as rlcpp's trainer.lora does; the rest of the recipe is unchanged.

Each prints human text on stderr and ONE JSON object as the last line of stdout. `step` times GRPO steps (one
step = one generation batch of prompts x group completions and its --minibatches optimizer steps, i.e.
--minibatches trainer steps of TRL); `grpo-run` writes the held-out accuracy curve (one JSON object per
evaluation, the keys and units of torch_peer_grpo_run.py: step, train_wall_s without eval time, accuracy in
0..1, mean_reward of the last training step, eval_mean_reward, eval_s) to --out and prints the usual object with
"curve". Evaluation (greedy, at most --new-tokens, exact answer then EOS, add3_task's held-out set) runs in a
TrainerCallback between GRPO steps, outside the training clock; TRL's own loop (trainer.train()) does all the
training.

How the recipe maps onto TRL 1.16 (GRPOConfig):
  P prompts x G samples    num_generations=G, per_device_train_batch_size=P*G/M, steps_per_generation=M,
                           gradient_accumulation_steps=1 (so generation_batch_size = P*G), num_iterations=1
  M mini-batches, a step   each of TRL's M trainer steps per generation batch is one mini-batch with its own
                           optimizer step; the second is off-policy, so TRL computes old log-probs
  temperature, N new       temperature=T, max_completion_length=N, top_k=0, top_p=1; stop at EOS (id 2)
  advantage                scale_rewards="group": (r - mean) / (std + 1e-4), unbiased std (TRL's constant)
  PPO-clip 0.2, no KL      epsilon=0.2 (epsilon_high the same), beta=0.0 (no reference model)
  token-mean loss          loss_type="bnpo": sum over the mini-batch's completion tokens / their number
  AdamW                    optim="adamw_torch", lr 1e-4, betas (0.9, 0.95), eps 1e-8, weight_decay 0,
                           max_grad_norm 1.0, lr_scheduler_type="constant", warmup_steps=0
  prompts                  rlcpp's training stream (add3_task.sample_train, run seed, Philox stream 1) in
                           order: a Dataset of them with shuffle_dataset=False
  no bf16/fp16, use_cpu, no vLLM, report_to="none", save_strategy="no", gradient_checkpointing=False
"""

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings

# Before torch loads: idle OpenMP threads must sleep, not spin (see torch_peer.py).
os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import add3_task  # noqa: E402
import torch_peer  # noqa: E402  (no torch: cpu flags and the OpenBLAS core type)

W1_SHAPE = dict(vocab_size=32, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=352, tie_word_embeddings=True)
REWARD_NAME = "add3_reward"
PHASES = ("rollout", "reward", "old_logprob", "prepare_other", "update")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def command(name, **defaults):
        c = sub.add_parser(name)
        c.add_argument("--checkpoint", required=True, help="rlcpp checkpoint directory (config.json + model.safetensors)")
        c.add_argument("--threads", type=int, default=2)
        c.add_argument("--seed", type=int, default=1, help="run seed: the training problems and TRL's seed")
        c.add_argument("--loss-type", default="bnpo", help="TRL loss_type (bnpo = token mean over the mini-batch)")
        c.add_argument("--gradient-checkpointing", action="store_true",
                       help="TRL's default; off here because rlcpp does not recompute activations")
        c.add_argument("--lora-rank", type=int, default=0, help="train peft LoRA adapters of this rank (0: all weights)")
        c.add_argument("--lora-alpha", type=float, default=16.0, help="lora_alpha")
        c.add_argument("--lora-targets", default="all-linear",
                       help="target_modules: all-linear or comma-separated module names")
        c.add_argument("--whole-group-minibatches", action="store_true",
                       help="patch out TRL's shuffle of the generation batch so that each mini-batch holds whole "
                            "groups in order, as rlcpp (TRL as shipped shuffles the rows)")
        for key, value in dict(prompts=64, group=8, new_tokens=6, minibatches=2, temperature=1.0, lr=1e-4,
                               clip=0.2, max_grad_norm=1.0, **defaults).items():
            c.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
        return c

    command("step", iters=3, warmup=1)
    command("grpo-run", steps=200, eval_every=20, eval_size=1000, log_every=10, out="")
    args = p.parse_args(argv)
    for key in ("prompts", "group", "new_tokens", "minibatches", "iters", "steps", "eval_every", "eval_size",
                "log_every", "threads"):
        if getattr(args, key, 1) < 1:
            p.error(f"--{key.replace('_', '-')} {getattr(args, key)}, expected >= 1")
    if getattr(args, "warmup", 0) < 0:
        p.error("--warmup must be >= 0")
    if args.group < 2:
        p.error("GRPO needs --group >= 2")
    if args.prompts % args.minibatches:
        p.error(f"--prompts {args.prompts} is not divisible into {args.minibatches} mini-batches of whole groups")
    if args.temperature <= 0:
        p.error(f"--temperature {args.temperature}, expected > 0 (GRPO samples)")
    return args


def make_tokenizer():
    """rlcpp's add3 character tokenizer as a PreTrainedTokenizerFast: PAD=0, BOS=1, EOS=2, add3_task.CHARSET as
    ids 3.., ids up to 31 as unused tokens that decode as '?' (as rlcpp's CharTokenizer::decode); each character
    is one token (Split on the empty regex) and a text encodes as [BOS] + chars, no EOS."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": add3_task.PAD, "<s>": add3_task.BOS, "</s>": add3_task.EOS}
    for i, c in enumerate(add3_task.CHARSET):
        vocab[c] = 3 + i
    for i in range(len(vocab), 32):
        vocab[f"<unused{i}>"] = i
    t = Tokenizer(models.WordLevel(vocab=vocab))  # no unk token: a character outside the charset is an error
    t.pre_tokenizer = pre_tokenizers.Split(Regex(""), behavior="isolated")
    t.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                                     special_tokens=[("<s>", add3_task.BOS)])
    t.decoder = decoders.Sequence([decoders.Replace(Regex(r"^<unused[0-9]+>$"), "?"), decoders.Fuse()])
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                   padding_side="left", truncation_side="left", clean_up_tokenization_spaces=False)


def check_tokenizer(tok, problems):
    ids = tok(text=[p["prompt"] for p in problems])["input_ids"]
    for p, got in zip(problems, ids):
        if got != add3_task.encode_prompt(p["prompt"]):
            raise SystemExit(f"trl_grpo: tokenizer encodes {p['prompt']!r} as {got}, "
                             f"rlcpp as {add3_task.encode_prompt(p['prompt'])}")
    sample = [[4, 5, 6, add3_task.EOS], [3, 21, 31], [add3_task.EOS]]
    got = tok.batch_decode(sample, skip_special_tokens=True)
    want = [add3_task.decode([t for t in s if t != add3_task.EOS]) for s in sample]
    if got != want:
        raise SystemExit(f"trl_grpo: tokenizer decodes {sample} as {got}, rlcpp as {want}")


class RewardFunc:
    """add3's reward for TRL: TRL passes the completions as text and, since 1.x, their ids (`completion_ids`: the
    tokens up to and including the first EOS), plus the dataset's other columns (`answer`). Termination is read
    from the ids (an EOS was generated), so the score is rlcpp's add3_task.score_tokens exactly. Keeps the last
    batch for the sanity check."""

    __name__ = REWARD_NAME

    def __init__(self):
        self.last = None

    def __call__(self, prompts, completions, completion_ids, answer, **kwargs):
        rewards = [add3_task.score_tokens(a, ids)[0] for a, ids in zip(answer, completion_ids)]
        self.last = {"prompts": list(prompts), "completions": list(completions),
                     "completion_ids": [list(c) for c in completion_ids], "answers": list(answer),
                     "rewards": rewards}
        return rewards


def rlcpp_advantages(rewards, group):
    """rlcpp's (r - group mean) / (group std + 1e-6), unbiased std, 0 for a group whose rewards are all equal."""
    out = []
    for g in range(0, len(rewards), group):
        r = rewards[g:g + group]
        mean = sum(r) / len(r)
        std = (sum((x - mean) ** 2 for x in r) / (len(r) - 1)) ** 0.5
        same = all(x == r[0] for x in r)
        out += [0.0 if same else (x - mean) / (std + 1e-6) for x in r]
    return out


def sanity_check(trainer, reward_func, logs, group):
    """Compares TRL's logged reward and advantages for a step with add3_task's scorer and rlcpp's advantage
    formula on the same completions."""
    last = reward_func.last
    texts, ids, answers = last["completions"], last["completion_ids"], last["answers"]
    text_matches = all(t == add3_task.decode([x for x in c if x != add3_task.EOS]) for t, c in zip(texts, ids))
    # The scorer on TRL's decoded text, termination from whether EOS was generated.
    from_text = [add3_task.score(a, t, add3_task.EOS in c)[0] for a, t, c in zip(answers, texts, ids)]
    trl_rewards = list(trainer._logs["rewards"][REWARD_NAME])
    trl_adv = list(trainer._logs["advantages"])
    ours = rlcpp_advantages(trl_rewards, group)
    out = {"trl_logged_reward_mean": logs.get("reward"),
           "scorer_reward_mean_on_text": sum(from_text) / len(from_text),
           "scorer_reward_mean_on_ids": sum(last["rewards"]) / len(last["rewards"]),
           "trl_rewards_equal_scorer": all(abs(a - b) < 1e-6 for a, b in zip(trl_rewards, last["rewards"])),
           "text_decodes_like_rlcpp": text_matches,
           "terminated_fraction": sum(1 for c in ids if add3_task.EOS in c) / len(ids),
           "correct_fraction": sum(1 for r in last["rewards"] if r == 1.0) / len(ids),
           "mean_completion_tokens": sum(len(c) for c in ids) / len(ids),
           "advantage_max_abs_diff_vs_rlcpp": max(abs(a - b) for a, b in zip(trl_adv, ours)),
           "advantage_abs_mean": sum(abs(a) for a in trl_adv) / len(trl_adv),
           "frac_reward_zero_std": logs.get("frac_reward_zero_std")}
    examples = [f"{p!r} -> {t!r} {c} (answer {a}, reward {r})" for p, t, c, a, r in
                zip(last["prompts"], texts, ids, answers, last["rewards"])][:4]
    log("check: " + json.dumps(out))
    for e in examples:
        log("  " + e)
    return out


class GRPOClock:
    """TRL's own timing (trl/extras/profiling.py ProfilingContext around _prepare_inputs, transformers.generate,
    _calculate_rewards, the reward function, _get_per_token_logps_and_entropies and compute_loss) only reports
    to wandb / mlflow / trackio: this records each of its measurements (name, start, end) instead."""

    def __init__(self):
        self.records = []

    def install(self):
        from trl.extras import profiling

        clock = self

        def _log_metrics(ctx, duration):
            clock.records.append((ctx.name.split(".", 1)[1], ctx._start_time, ctx._start_time + duration))

        profiling.ProfilingContext._log_metrics = _log_metrics

    def phases(self, begin, end):
        """Seconds of each phase in [begin, end] (one GRPO step): rollout (transformers.generate), reward
        (_calculate_rewards), old_logprob (_get_per_token_logps_and_entropies inside _prepare_inputs),
        prepare_other (the rest of _prepare_inputs: tokenising, decoding, padding, advantages, metrics) and
        update (everything else: the mini-batches' loss forward, backward, clip, AdamW, the Trainer's loop)."""
        recs = [r for r in self.records if r[1] >= begin and r[2] <= end]
        prepare = [r for r in recs if r[0] == "_prepare_inputs"]
        inside = lambda r: any(p[1] <= r[1] and r[2] <= p[2] for p in prepare)  # noqa: E731
        total = lambda name, cond=lambda r: True: sum(r[2] - r[1] for r in recs if r[0] == name and cond(r))  # noqa
        out = {"rollout": total("transformers.generate"), "reward": total("_calculate_rewards"),
               "old_logprob": total("_get_per_token_logps_and_entropies", inside)}
        prep = total("_prepare_inputs")
        out["prepare_other"] = prep - out["rollout"] - out["reward"] - out["old_logprob"]
        out["update"] = (end - begin) - prep
        raw = {}
        for name, s, e in recs:
            key = name + (" (in _prepare_inputs)" if name == "_get_per_token_logps_and_entropies" and inside((name, s, e))
                          else " (in compute_loss)" if name == "_get_per_token_logps_and_entropies" else "")
            raw[key] = raw.get(key, 0.0) + (e - s)
        return out, raw


def evaluate(model, problems, new_tokens):
    """Greedy held-out accuracy (exact answer then EOS) and mean reward with transformers' generate: prompts
    [BOS] + chars, left-padded, at most `new_tokens` new tokens, stop at EOS."""
    import torch
    from transformers import GenerationConfig

    prompts = [add3_task.encode_prompt(p["prompt"]) for p in problems]
    lp = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), lp), add3_task.PAD, dtype=torch.long)
    mask = torch.zeros((len(prompts), lp), dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, lp - len(p):] = torch.tensor(p)
        mask[i, lp - len(p):] = 1
    config = GenerationConfig(do_sample=False, max_new_tokens=new_tokens, eos_token_id=add3_task.EOS,
                              pad_token_id=add3_task.PAD, bos_token_id=add3_task.BOS)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, generation_config=config)
    if was_training:
        model.train()
    scores = []
    for p, row in zip(problems, out[:, lp:].tolist()):
        response = row[:row.index(add3_task.EOS) + 1] if add3_task.EOS in row else row
        scores.append(add3_task.score_tokens(p["answer"], response))
    return (sum(1 for _, correct, _ in scores if correct) / len(scores),
            sum(total for total, _, _ in scores) / len(scores))


def make_callback(args, clock, reward_func, held_out, out_file):
    from transformers import TrainerCallback

    class StepCallback(TrainerCallback):
        """Marks the end of each GRPO step (TRL logs once per generation batch: logging_steps = --minibatches),
        keeps TRL's logged metrics, and in grpo-run evaluates every --eval-every steps with the clock paused."""

        def __init__(self):
            self.trainer = None
            self.steps = []  # per GRPO step: wall seconds, phase seconds, TRL's logs
            self.curve = []
            self.check = None
            self.begin = None
            self.train_wall = 0.0

        def record(self, model, step, mean_reward):
            start = time.perf_counter()
            accuracy, eval_reward = evaluate(model, held_out, args.new_tokens)
            eval_s = time.perf_counter() - start
            row = {"step": step, "train_wall_s": self.train_wall, "accuracy": accuracy, "mean_reward": mean_reward,
                   "eval_mean_reward": eval_reward, "eval_s": eval_s}
            self.curve.append(row)
            if out_file:
                out_file.write(json.dumps(row) + "\n")
                out_file.flush()
            log(f"grpo-run step {step:4d}/{args.steps} | train {self.train_wall:7.1f} s | held-out "
                f"{100 * accuracy:5.1f}% | reward {mean_reward if mean_reward is not None else float('nan'):.3f} "
                f"| eval {eval_s:.1f} s")

        def on_train_begin(self, targs, state, control, model=None, **kwargs):
            if held_out is not None:
                self.record(model, 0, None)  # the checkpoint itself, before any training
            self.begin = time.perf_counter()

        def on_log(self, targs, state, control, logs=None, model=None, **kwargs):
            if not logs or "reward" not in logs:
                return
            end = time.perf_counter()
            wall = end - self.begin
            self.train_wall += wall
            phases, raw = clock.phases(self.begin, end)
            step = state.global_step // args.minibatches
            self.steps.append({"wall": wall, "phases": phases, "raw": raw, "logs": dict(logs)})
            if step == 1:
                self.check = sanity_check(self.trainer, reward_func, logs, args.group)
            total = args.steps if held_out is not None else args.warmup + args.iters
            evaluating = held_out is not None and (step % args.eval_every == 0 or step == args.steps)
            if held_out is None or step == 1 or evaluating or step % args.log_every == 0:
                log(f"GRPO step {step}/{total}: {1e3 * wall:.0f} ms (" +
                    ", ".join(f"{k} {1e3 * v:.0f}" for k, v in phases.items()) +
                    f") | TRL reward {logs['reward']:.3f} | loss {logs.get('loss', float('nan')):.4f}")
            if evaluating:
                self.record(model, step, logs["reward"])
            self.begin = time.perf_counter()  # evaluation and this bookkeeping stay off the clock

    return StepCallback()


def model_name(config):
    if all(getattr(config, k, None) == v for k, v in W1_SHAPE.items()):
        return "W1"
    return (f"llama v{config.vocab_size} h{config.hidden_size} l{config.num_hidden_layers} "
            f"heads {config.num_attention_heads}/{config.num_key_value_heads} ffn {config.intermediate_size}")


def run(args):
    import torch

    torch.set_num_threads(args.threads)
    import datasets
    import transformers
    import trl
    from transformers import LlamaForCausalLM, PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    transformers.logging.set_verbosity_warning()
    datasets.disable_progress_bars()
    grpo_steps = args.steps if args.command == "grpo-run" else args.warmup + args.iters
    rng = add3_task.PhiloxStream(args.seed, add3_task.DATA_STREAM)
    problems = [add3_task.sample_train(rng) for _ in range(grpo_steps * args.prompts)]
    dataset = datasets.Dataset.from_list([{"prompt": p["prompt"], "answer": p["answer"]} for p in problems])
    tok = make_tokenizer()
    check_tokenizer(tok, problems[:256])
    model = LlamaForCausalLM.from_pretrained(args.checkpoint, torch_dtype=torch.float32)
    name = model_name(model.config)
    rows = args.prompts * args.group
    notes = []
    if args.whole_group_minibatches:
        import trl.trainer.grpo_trainer as grpo_module

        grpo_module.shuffle_sequence_dict = lambda d: d  # mini-batches of whole groups, in order
        notes.append("--whole-group-minibatches: TRL's shuffle of the generation batch before the mini-batch split "
                     "is patched out (shuffle_sequence_dict -> identity)")
    else:
        notes.append(f"mini-batches: TRL shuffles the {rows} completions (shuffle_sequence_dict) before splitting "
                     f"them into the {args.minibatches} mini-batches, so a mini-batch holds rows of many groups, not "
                     f"{args.prompts // args.minibatches} whole groups; no option turns this off "
                     "(--whole-group-minibatches patches it)")
    out_dir = tempfile.mkdtemp(prefix="trl_grpo_")
    config = GRPOConfig(
        output_dir=out_dir, use_cpu=True, bf16=False, fp16=False, report_to="none", save_strategy="no",
        logging_strategy="steps", logging_steps=args.minibatches, disable_tqdm=True, seed=args.seed,
        data_seed=args.seed, max_steps=grpo_steps * args.minibatches, num_train_epochs=1,
        per_device_train_batch_size=rows // args.minibatches, gradient_accumulation_steps=1,
        steps_per_generation=args.minibatches, num_iterations=1, num_generations=args.group,
        max_completion_length=args.new_tokens, temperature=args.temperature, top_p=1.0, top_k=0,
        scale_rewards="group", loss_type=args.loss_type, epsilon=args.clip, beta=0.0,
        learning_rate=args.lr, lr_scheduler_type="constant", warmup_steps=0, optim="adamw_torch",
        adam_beta1=0.9, adam_beta2=0.95, adam_epsilon=1e-8, weight_decay=0.0, max_grad_norm=args.max_grad_norm,
        activation_checkpointing=args.gradient_checkpointing, shuffle_dataset=False, use_vllm=False,
        log_completions=False, dataloader_pin_memory=False, dataloader_num_workers=0,
    )
    held_out = add3_task.eval_set(args.eval_size) if args.command == "grpo-run" else None
    out_file = open(args.out, "w") if getattr(args, "out", "") else None
    clock = GRPOClock()
    clock.install()
    reward_func = RewardFunc()
    callback = make_callback(args, clock, reward_func, held_out, out_file)
    peft_config = None
    if args.lora_rank > 0:
        import peft
        targets = args.lora_targets if args.lora_targets == "all-linear" else args.lora_targets.split(",")
        peft_config = peft.LoraConfig(r=args.lora_rank, lora_alpha=args.lora_alpha, target_modules=targets,
                                      lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
        log(f"peft {peft.__version__}: LoRA rank {args.lora_rank}, alpha {args.lora_alpha:g}, targets {targets}")
    trainer = GRPOTrainer(model=model, reward_funcs=[reward_func], args=config, train_dataset=dataset,
                          processing_class=tok, callbacks=[callback], peft_config=peft_config)
    callback.trainer = trainer
    for cb in (PrinterCallback, ProgressCallback):  # they print logs on stdout
        trainer.remove_callback(cb)
    torch.set_num_threads(args.threads)  # in case anything above changed it
    log(f"trl {trl.__version__}, transformers {transformers.__version__}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads; {name} from {args.checkpoint}; {args.prompts} x {args.group}, "
        f"{args.minibatches} mini-batches of {rows // args.minibatches}, loss {args.loss_type}, "
        f"{grpo_steps} GRPO steps = {grpo_steps * args.minibatches} TRL trainer steps")
    try:
        trainer.train()
    finally:
        if out_file:
            out_file.close()
        shutil.rmtree(out_dir, ignore_errors=True)

    if trainer.state.global_step != grpo_steps * args.minibatches or len(callback.steps) != grpo_steps:
        raise SystemExit(f"trl_grpo: TRL ran {trainer.state.global_step} trainer steps and logged "
                         f"{len(callback.steps)} GRPO steps, expected {grpo_steps * args.minibatches} and {grpo_steps}")
    if args.loss_type == "bnpo":
        notes.append("loss_type bnpo: per-token PPO-clip loss summed over the mini-batch's completion tokens / their "
                     "number, with gradient_accumulation_steps 1 = rlcpp's token mean over the mini-batch (dapo, "
                     "TRL's default, divides by the generation batch's token count / steps_per_generation instead)")
    notes += [
        "advantage: TRL divides by (group std + 1e-4), rlcpp by (std + 1e-6); a hard-coded constant in TRL",
        "TRL computes per-token entropy in every loss forward (for its metrics) and logs clip ratios; rlcpp does not",
        "gradient_checkpointing " + ("on (TRL's default)" if args.gradient_checkpointing else
                                     "off (TRL's default is on; rlcpp does not recompute activations)"),
        "sampling: transformers generate (DynamicCache, multinomial), TRL seeds it with set_seed(seed, "
        "device_specific=True): the same prompts as rlcpp, not the same samples",
        "rows after EOS: generate keeps decoding finished rows (PAD) until every row has ended or N tokens",
    ]
    if args.command == "grpo-run":
        notes.append("eval: transformers generate, greedy, left-padded, in a TrainerCallback.on_log after each "
                     "GRPO step's optimizer steps; the clock is paused for it")
    steps = callback.steps
    out = {"peer": "trl", "trl": trl.__version__, "transformers": transformers.__version__,
           "torch": torch.__version__, "command": args.command, "model": name, "checkpoint": args.checkpoint,
           "threads": args.threads, "torch_threads": torch.get_num_threads(), "seed": args.seed,
           "lora_rank": args.lora_rank,
           "prompts": args.prompts, "group": args.group, "new_tokens": args.new_tokens,
           "minibatches": args.minibatches, "lr": args.lr, "loss_type": args.loss_type,
           "scale_rewards": "group", "whole_group_minibatches": args.whole_group_minibatches,
           "gradient_checkpointing": args.gradient_checkpointing}
    timed = steps[args.warmup:] if args.command == "step" else steps
    if args.command == "step":
        out.update({"iters": args.iters, "warmup": args.warmup})
    out["step_ms"] = 1e3 * statistics.median(s["wall"] for s in timed)
    out["ms"] = out["step_ms"]
    out["step_ms_all"] = [1e3 * s["wall"] for s in timed]
    out["phases_ms"] = {k: 1e3 * statistics.median(s["phases"][k] for s in timed) for k in PHASES}
    out["phase_shares"] = {k: v / sum(out["phases_ms"].values()) for k, v in out["phases_ms"].items()}
    keys = sorted({k for s in timed for k in s["raw"]})
    out["trl_profiling_ms"] = {k: 1e3 * statistics.median(s["raw"].get(k, 0.0) for s in timed) for k in keys}
    out["phase_source"] = (
        "TRL's own ProfilingContext timings (trl/extras/profiling.py: it only reports to wandb/mlflow/trackio, so "
        "its _log_metrics is replaced to record name, start, duration): rollout = GRPOTrainer.transformers.generate, "
        "reward = _calculate_rewards, old_logprob = _get_per_token_logps_and_entropies inside _prepare_inputs, "
        "prepare_other = the rest of _prepare_inputs; update = the GRPO step's wall time (perf_counter between "
        "TRL's per-step on_log callbacks) minus _prepare_inputs: the mini-batches' compute_loss forwards (TRL-timed, "
        "see trl_profiling_ms), backward, grad clip, AdamW and the Trainer loop. TRL's own step_time metric "
        "(its training_step seconds, summed over the mini-batches: no grad clip or AdamW) is trl_training_step_ms")
    # TRL's own step_time metric: seconds of Trainer.training_step (_prepare_inputs, loss forward, backward) per
    # trainer step, averaged over the GRPO step's mini-batches; times M = the GRPO step without clip and AdamW.
    out["trl_training_step_ms"] = 1e3 * args.minibatches * statistics.median(
        s["logs"].get("step_time", float("nan")) for s in timed)
    out["mean_reward"] = steps[-1]["logs"]["reward"]
    out["rewards"] = [s["logs"]["reward"] for s in steps]
    out["completion_tokens_per_step"] = statistics.median(
        rows * (s["logs"].get("completions/mean_length", 0.0)) for s in timed)
    out["activation_checkpointing_on"] = bool(trainer.model.is_activation_checkpointing)
    out["check"] = callback.check
    if args.command == "grpo-run":
        out.update({"steps": args.steps, "eval_every": args.eval_every, "eval_size": len(held_out),
                    "train_wall_s": callback.curve[-1]["train_wall_s"],
                    "final_accuracy": callback.curve[-1]["accuracy"], "curve": callback.curve})
        for k in PHASES:
            out[k + "_ms"] = out["phases_ms"][k]
    out["notes"] = notes
    log(f"{args.command}: median GRPO step {out['step_ms']:.0f} ms = " +
        ", ".join(f"{k} {100 * v:.0f} %" for k, v in out["phase_shares"].items()))
    return out


def main(argv):
    args = parse_args(argv)
    warnings.filterwarnings("ignore", category=FutureWarning)  # transformers 5's renames, which TRL 1.16 still calls
    coretype = torch_peer.openblas_coretype()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    os.environ["MKL_NUM_THREADS"] = str(args.threads)
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):  # whatever TRL or transformers print goes to stderr
        result = run(args)
    result["openblas_coretype"] = coretype
    print(json.dumps(result), file=stdout, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
