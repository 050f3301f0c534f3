"""Loading a family's processor and model when an optional backend is missing, without changing any number.

Why this exists (measured on this project's machines, torch 2.13.0 CPU wheel):
- torchaudio: no 2.13 release exists; torchaudio 2.11.x declares `torch>=2.11` (stable ABI, "all future
  releases"), but PyPI's x86_64 wheel links libtorch_cuda/libc10_cuda, so beside the CPU torch wheel its
  import fails (OSError). Granite Speech uses torchaudio only for `transforms.MelSpectrogram`, which is plain
  torch (STFT power spectrum x HTK mel filterbank); `TorchMelGraniteFeatureExtractor` computes exactly that.
- torchvision (PyPI's 0.28.0 pairs with torch 2.13) is CUDA-linked as well ("operator torchvision::nms does
  not exist"), and timm needs it. They only serve image/video inputs: Phi-4's image processor, Qwen2.5-Omni's
  video processor, Gemma 3n's vision tower. Audio prompts never reach them, so they are stood in for.
With CUDA torch (a GPU machine) all three install normally and the stock classes are used.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)


def importable(module: str) -> bool:
    """True when `module` imports (a present but broken CUDA-linked wheel counts as missing)."""
    if importlib.util.find_spec(module) is None:
        return False
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001 - OSError/RuntimeError from a wheel built for another torch
        return False
    return True


def htk_mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int) -> Any:
    """(n_freqs, n_mels) triangular HTK-mel filters over 0..sr/2, no normalisation (torchaudio's defaults)."""
    import torch

    def hz_to_mel(f: torch.Tensor) -> torch.Tensor:
        return 2595.0 * torch.log10(1.0 + f / 700.0)

    def mel_to_hz(m: torch.Tensor) -> torch.Tensor:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)

    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    edges = torch.tensor([0.0, sample_rate / 2.0])
    m_pts = torch.linspace(float(hz_to_mel(edges[0])), float(hz_to_mel(edges[1])), n_mels + 2)
    f_pts = mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.clamp(torch.min(down, up), min=0.0)


class TorchMelSpectrogram:
    """torchaudio.transforms.MelSpectrogram(sample_rate, n_fft, win_length, hop_length, n_mels) in plain torch:
    centred reflect-padded STFT with a periodic Hann window, power 2, HTK mel filters, norm None."""

    def __init__(self, sample_rate: int, n_fft: int, win_length: int, hop_length: int, n_mels: int) -> None:
        import torch

        self.n_fft, self.win_length, self.hop_length = n_fft, win_length, hop_length
        self.window = torch.hann_window(win_length)
        self.fb = htk_mel_filterbank(n_fft // 2 + 1, n_mels, sample_rate)

    def to(self, device: Any) -> TorchMelSpectrogram:
        self.window, self.fb = self.window.to(device), self.fb.to(device)
        return self

    def __call__(self, waveform: Any) -> Any:
        import torch

        spec = torch.stft(waveform, self.n_fft, self.hop_length, self.win_length, self.window.to(waveform.device),
                          center=True, pad_mode="reflect", normalized=False, onesided=True, return_complex=True)
        power = spec.abs().pow(2.0)  # (B, freqs, frames)
        return torch.matmul(power.transpose(-1, -2), self.fb.to(power.device)).transpose(-1, -2)


def granite_feature_extractor_class() -> type:
    """GraniteSpeechFeatureExtractor with its torchaudio MelSpectrogram replaced by TorchMelSpectrogram."""
    from transformers import GraniteSpeechFeatureExtractor
    from transformers.feature_extraction_sequence_utils import SequenceFeatureExtractor
    from transformers.feature_extraction_utils import BatchFeature

    class TorchMelGraniteFeatureExtractor(GraniteSpeechFeatureExtractor):
        """Same features as the stock class (its own code below the mel), no torchaudio needed."""

        def __init__(self, sampling_rate: int = 16000, n_fft: int = 512, win_length: int = 400,
                     hop_length: int = 160, n_mels: int = 80, projector_window_size: int = 15,
                     projector_downsample_rate: int = 5, padding_value: float = 0.0, **kwargs: Any) -> None:
            feature_size = n_mels if kwargs.get("feature_size") is None else kwargs.pop("feature_size")
            SequenceFeatureExtractor.__init__(self, feature_size=feature_size, sampling_rate=sampling_rate,
                                              padding_value=padding_value, **kwargs)
            self.sampling_rate = sampling_rate
            self.melspec_kwargs = {"sample_rate": sampling_rate, "n_fft": n_fft, "win_length": win_length,
                                   "hop_length": hop_length, "n_mels": n_mels}
            self.mel_filters = TorchMelSpectrogram(**self.melspec_kwargs)
            self.projector_window_size = projector_window_size
            self.projector_downsample_rate = projector_downsample_rate

        def __call__(self, audios: Any, device: str | None = "cpu") -> BatchFeature:
            import torch

            batched, lengths = self._get_audios_and_audio_lengths(audios)
            sizes = self._get_num_audio_features(lengths)
            return BatchFeature(data={
                "input_features": self._extract_mel_spectrograms(batched, device=device),
                "audio_embed_sizes": sizes,
                "input_features_mask": torch.arange(max(sizes)).view(1, -1) < torch.tensor(sizes).view(-1, 1),
            })

        def _extract_mel_spectrograms(self, audio: Any, device: str | None = "cpu") -> Any:
            # The stock method minus its torchaudio check (transformers' feature_extraction_granite_speech.py).
            import torch

            melspec = self.mel_filters.to(device) if device is not None else self.mel_filters
            audio = audio.to(device) if device is not None else audio
            bsz = audio.shape[0]
            with torch.no_grad():
                logmel = melspec(audio.float()).transpose(-1, -2).clip_(min=1e-10).log10_()
                mx = logmel.amax(dim=(-2, -1), keepdim=True)
                logmel = torch.maximum(logmel, mx - 8.0).div_(4).add_(1)
                if logmel.shape[1] % 2 == 1:
                    logmel = logmel[:, :-1]
                return logmel.reshape(bsz, -1, 2 * logmel.shape[-1])

        def to_dict(self) -> dict[str, Any]:
            out = super().to_dict()
            out["feature_extractor_type"] = "GraniteSpeechFeatureExtractor"  # loads as the stock class
            return out

    return TorchMelGraniteFeatureExtractor


class StandIn:
    """Marks an image/video sub-processor that is only a placeholder (its backend, torchvision, is missing)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("this processor was built without torchvision: images and videos are unsupported "
                           "(pip install torchvision with a CUDA build of torch)")


def visual_standin(modality: str) -> Any:
    """An empty image or video processor that raises if it is ever used."""
    from transformers.image_processing_utils import BaseImageProcessor
    from transformers.video_processing_utils import BaseVideoProcessor

    base = BaseImageProcessor if modality == "image_processor" else BaseVideoProcessor
    return type(f"NoTorchvision{base.__name__}", (StandIn, base), {})()


def with_standins(cls: type) -> type:
    """`cls` accepting StandIn sub-processors (its own type check cannot resolve them without torchvision)."""

    class Processor(cls):  # type: ignore[misc, valid-type]
        def check_argument_for_proper_class(self, argument_name: str, argument: Any) -> Any:
            if isinstance(argument, StandIn):
                return type(argument)
            return super().check_argument_for_proper_class(argument_name, argument)

    Processor.__name__ = Processor.__qualname__ = cls.__name__  # saves and reloads as the stock class
    return Processor


# The sub-processor kinds a processor attribute name can hold, most specific first. transformers itself maps an
# attribute ("image_processor", "encoder_image_processor", "text_tokenizer") to its kind by the first of these
# its name contains (a private helper of transformers.processing_utils, so not imported: it may go without
# notice); the rule is pinned here and checked against every family's processor in tests/test_frontends.py.
MODALITIES = ("audio_tokenizer", "image_processor", "video_processor", "feature_extractor", "audio_processor",
              "tokenizer")


def modality_of(attribute: str) -> str:
    """The sub-processor kind of a processor attribute ("encoder_image_processor" -> "image_processor")."""
    for modality in MODALITIES:
        if modality in attribute:
            return modality
    raise ValueError(f"cannot tell the sub-processor kind of processor attribute {attribute!r}")


def load_processor(spec: Any, path: str, hub: dict[str, Any]) -> Any:
    """The family's processor as from_pretrained builds it; sub-processors whose backend cannot be imported
    here are replaced (Granite's mel by the torch one, unused image/video processors by empty stand-ins)."""
    import transformers

    cls = getattr(transformers, spec.processor_class)
    vision_ok = importable("torchvision")
    granite_mel = spec.name == "granite-speech" and not importable("torchaudio")
    attributes = cls.get_attributes() if hasattr(cls, "get_attributes") else []
    visual = [a for a in attributes if modality_of(a) in ("image_processor", "video_processor")]
    if not granite_mel and (vision_ok or not visual):
        return cls.from_pretrained(path, **hub)
    args = []
    for attribute in attributes:
        modality = modality_of(attribute)
        if modality == "tokenizer":
            args.append(transformers.AutoTokenizer.from_pretrained(path, **hub))
        elif modality in ("image_processor", "video_processor") and not vision_ok:
            args.append(visual_standin(modality))
        elif granite_mel and modality in ("audio_processor", "feature_extractor"):
            args.append(granite_feature_extractor_class().from_pretrained(path, **hub))
        elif modality == "image_processor":
            args.append(transformers.AutoImageProcessor.from_pretrained(path, **hub))
        elif modality == "video_processor":
            args.append(transformers.AutoVideoProcessor.from_pretrained(path, **hub))
        else:
            args.append(transformers.AutoFeatureExtractor.from_pretrained(path, **hub))
    log.info("%s: built %s from parts (%s)", spec.name, cls.__name__,
             "torch mel in place of torchaudio" if granite_mel else "no torchvision: visual stand-ins")
    processor_dict, kwargs = cls.get_processor_dict(path, **hub)
    return with_standins(cls).from_args_and_dict(args, processor_dict, **kwargs)


@contextlib.contextmanager
def without_towers(spec: Any) -> Iterator[None]:
    """Build the family's unused towers (e.g. Gemma 3n's timm vision tower) as empty modules while loading,
    when the package they need cannot be imported; their checkpoint weights are then left unused."""
    missing = [r for r in spec.requires if r.module == "timm" and not importable("timm")]
    if not spec.unused_towers or not missing:
        yield
        return
    import sys

    import transformers
    from torch import nn

    module = sys.modules[getattr(transformers, spec.model_class).__module__]
    real = module.AutoModel

    class _AutoModelWithoutVision:
        @staticmethod
        def from_config(config: Any, *args: Any, **kwargs: Any) -> Any:
            if type(config).__name__.endswith("VisionConfig"):
                return nn.Module()  # no parameters; never called for audio/text prompts
            return real.from_config(config, *args, **kwargs)

    log.info("%s: %s not importable; building %s empty (audio prompts never use it)", spec.name,
             missing[0].module, ", ".join(spec.unused_towers))
    module.AutoModel = _AutoModelWithoutVision
    try:
        yield
    finally:
        module.AutoModel = real
