"""Throughput of the three ways to get an answer out of Qwen2-Audio, in clips per second.

  generate-b1   batch 1, stock forward, greedy generation (the published protocol)
  choices       batched score_choices, stock encoder (30 s of mel per clip)
  choices-fast  batched score_choices, fast encoder (valid mel frames only)

CPU (default): the tiny random model. `--device cuda --size 7b`: a Qwen2-Audio-7B-shaped model with random
weights (bf16, sdpa), 4 s clips, peak memory per mode; target >= 200 clips/s for choices-fast on one H200.
Random weights never emit EOS, so generate-b1 always decodes --gen-tokens tokens (default 3: a one-word
answer plus end of turn, as a real model's answer would be).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.models.families import QWEN2_AUDIO  # noqa: E402
from harness.models.hf import HFAudioLM  # noqa: E402
from harness.models.protocol import AudioClip, Prompt  # noqa: E402
from harness.models.tiny import build_tiny, build_tokenizer  # noqa: E402

QUESTION = 'Does the {attr} increase or decrease over time?\n\nAnswer with only one word: "increase" or "decrease".'
ATTRS = ("speaking speed", "voice pitch", "volume", "audio distortion", "audio roughness", "background noise",
         "echo", "voice clarity", "voice vibration")


def build_7b(device: str, text_layers: int | None, encoder_layers: int | None):
    """Qwen2-Audio-7B's published shapes (Whisper-large encoder + Qwen2-7B decoder), random bf16 weights."""
    import transformers as tf

    tokenizer = build_tokenizer(("<|AUDIO|>", "<|audio_bos|>", "<|audio_eos|>"))
    processor = tf.Qwen2AudioProcessor(
        feature_extractor=tf.WhisperFeatureExtractor(feature_size=128, return_attention_mask=True), tokenizer=tokenizer
    )
    text = tf.Qwen2Config(
        vocab_size=156032, hidden_size=3584, intermediate_size=18944, num_hidden_layers=text_layers or 28,
        num_attention_heads=28, num_key_value_heads=4, max_position_embeddings=8192, rope_theta=10000.0,
        rms_norm_eps=1e-5, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    audio = {"model_type": "qwen2_audio_encoder", "encoder_layers": encoder_layers or 32}
    config = tf.Qwen2AudioConfig(audio_config=audio, text_config=text,
                                 audio_token_index=tokenizer.convert_tokens_to_ids("<|AUDIO|>"))
    torch.manual_seed(0)
    with torch.device(device):
        model = tf.Qwen2AudioForConditionalGeneration._from_config(
            config, attn_implementation="sdpa", dtype=torch.bfloat16
        ).eval()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, processor


def make_prompts(n: int, seconds: float, seed: int = 0) -> list[Prompt]:
    """n prompts of `seconds` of speech-band noise at 16 kHz, each with a category question."""
    rng = np.random.default_rng(seed)
    sr = 16000
    out = []
    for i in range(n):
        x = (0.1 * rng.standard_normal(int(seconds * sr))).astype(np.float32)
        out.append(Prompt((QUESTION.format(attr=ATTRS[i % len(ATTRS)]), AudioClip(x, sr)), clip_id=f"clip{i}"))
    return out


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(name: str, fn, prompts: list[Prompt], warm: int, device: str) -> dict:
    """fn(prompts[:warm]) to warm up (kernels, allocator), then time fn(prompts); clips/s and peak memory."""
    n_clips = len(prompts)
    fn(prompts[:warm])
    _sync(device)
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    value = fn(prompts)
    _sync(device)
    seconds = time.perf_counter() - start
    row = {"mode": name, "clips": n_clips, "seconds": round(seconds, 3), "clips_per_s": round(n_clips / seconds, 2)}
    if device.startswith("cuda"):
        row["peak_mem_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    row["_value"] = value
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", choices=("tiny", "7b"), default="tiny")
    ap.add_argument("--clips", type=int, default=None, help="clips per batched mode (default 48 tiny, 1024 7b)")
    ap.add_argument("--gen-clips", type=int, default=None, help="clips for generate-b1 (default 8 tiny, 32 7b)")
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--batch", type=int, default=None, help="batch size (default 16 tiny, 64 7b)")
    ap.add_argument("--gen-tokens", type=int, default=3)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    ap.add_argument("--text-layers", type=int, default=None, help="7b: override decoder depth (smoke tests)")
    ap.add_argument("--encoder-layers", type=int, default=None, help="7b: override encoder depth (smoke tests)")
    ap.add_argument("--out", type=Path, default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    big = args.size == "7b"
    clips = args.clips or (1024 if big else 48)
    gen_clips = args.gen_clips or (32 if big else 8)
    batch = args.batch or (64 if big else 16)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("CUDA requested but torch.cuda.is_available() is False", file=sys.stderr)
        return 2

    t0 = time.perf_counter()
    model, processor = build_7b(args.device, args.text_layers, args.encoder_layers) if big else build_tiny("qwen2-audio")
    feature_device = args.device if args.device.startswith("cuda") else None
    dtype = "bfloat16" if big else "float32"

    def wrapper(batch_size: int, fast: bool) -> HFAudioLM:
        return HFAudioLM("bench", QWEN2_AUDIO, model=model, processor=processor, device=args.device, dtype=dtype,
                         batch_size=batch_size, fast_encoder=fast, feature_device=feature_device)

    build_s = time.perf_counter() - t0
    prompts = make_prompts(clips, args.seconds)
    choices = ("increase", "decrease")
    generate, stock, fast = wrapper(1, False), wrapper(batch, False), wrapper(batch, True)
    rows = [
        timed("generate-b1", lambda ps: generate.generate(ps, max_new_tokens=args.gen_tokens), prompts[:gen_clips],
              2, args.device),
        timed("choices", lambda ps: stock.score_choices(ps, choices), prompts, batch, args.device),
        timed("choices-fast", lambda ps: fast.score_choices(ps, choices), prompts, batch, args.device),
    ]
    for r, lm in zip(rows, (generate, stock, fast), strict=True):
        r["final_batch_size"] = lm.batch_size  # smaller than asked if OOM halved it
    stock, fast = rows[1].pop("_value"), rows[2].pop("_value")
    rows[0].pop("_value")
    base = rows[0]["clips_per_s"]
    for r in rows:
        r["vs_generate_b1"] = round(r["clips_per_s"] / base, 2)
    diff = float(np.abs(stock - fast).max())
    summary = {"size": args.size, "device": args.device, "seconds_per_clip": args.seconds, "batch": batch,
               "build_s": round(build_s, 1), "fast_vs_stock_max_abs_score_diff": diff, "rows": rows,
               "torch": torch.__version__}
    if args.device.startswith("cuda"):
        summary["gpu"] = torch.cuda.get_device_name()
    print(f"{'mode':<14}{'clips/s':>10}{'x gen-b1':>10}{'peak GiB':>10}")
    for r in rows:
        print(f"{r['mode']:<14}{r['clips_per_s']:>10.1f}{r['vs_generate_b1']:>10.1f}{r.get('peak_mem_gib', '-'):>10}")
    print(f"choices-fast / choices = {rows[2]['clips_per_s'] / rows[1]['clips_per_s']:.2f}x; "
          f"max |score diff| fast vs stock = {diff:.2e}; build {build_s:.1f}s")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
