"""Teaching that holds up (issue 11): the false or misleading sentences a fact-check found in the
course, and the wrong claims of the course's seed, stay out of every notebook (solutions/ and
course/, markdown and code), out of the package's docstrings, comments and messages
(gpulab/**/*.py) and out of README.md and course/*.md.

Each entry of PHRASES is a pattern, why the sentence it matches is wrong, the old false
sentences it must match (copied from the commit that had them, or the seed's claim in its own
words) and correct sentences it must leave alone — both are tested, so a pattern cannot
silently stop matching what it was written for, nor start flagging the corrections. A pattern
may name an ``unless``: a match is forgiven when its sentence also says the qualifier that
makes it true (a condition, a precision, a negation).

Text is compared flattened: runs of whitespace become one space (a paragraph break or a list
item stays a line break), and in Python the pieces of an implicitly concatenated string and
consecutive comment lines are joined, so a phrase broken across lines is still found.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

OLD = "722d584"  # chapters 05-08 as first committed (issue 6)
HEAD_BEFORE_11 = "268a9ad"  # the course as the fact-check found it
SEED = "the seed's claim (issue 11, 'Where the seeds themselves are wrong')"


@dataclass(frozen=True)
class Phrase:
    name: str
    pattern: str
    why: str
    examples: tuple[tuple[str, str], ...]  # (where it was, the old sentence)
    fine: tuple[str, ...] = ()  # correct sentences the pattern must not flag
    unless: str | None = None  # a match is forgiven if its sentence also matches this
    unless_next: bool = False  # ... or the sentence after it
    case_sensitive: bool = False
    prose_only: bool = False  # only markdown (cells and .md files), not code or Python

    @property
    def regex(self) -> re.Pattern:
        return re.compile(self.pattern, 0 if self.case_sensitive else re.IGNORECASE)

    @property
    def unless_regex(self) -> re.Pattern | None:
        return re.compile(self.unless, re.IGNORECASE) if self.unless else None


G = r"[^.\n]"  # a gap inside one sentence

PHRASES: tuple[Phrase, ...] = (
    Phrase(
        "1/64 of naive",
        r"\b1\s*/\s*64\b(?: of)?(?: the)?(?: naive)",
        "the register-blocked kernel's 128 x 128 block tile cuts device-memory loads per FLOP "
        "to 1/128 of the naive kernel's (chapter 03 derives it)",
        ((f"{HEAD_BEFORE_11}:gpulab/kernels/matmul.py, matmul_register_blocked",
          "Device-memory loads per FLOP: 1/64 of naive."),),
        fine=("Device-memory loads per FLOP: 1/128 of naive.",
              "each thread computes 1/64 of the block's outputs"),
    ),
    Phrase(
        "larger than any CPU cache",
        r"\blarger than (?:any|every) (?:\w+ )?(?:CPU )?cache",
        "server CPUs have 32-1152 MB of L3 and the H100 50 MB of L2: say which cache, and "
        "what holding the data there would change",
        ((f"{OLD}:solutions/05_dense_layer.ipynb",
          "A layer output of 4096 × 1024 float32 values (16 MB, larger than any CPU cache)."),),
        fine=("16 MB: larger than this laptop's 8 MB L3 cache, smaller than the H100's 50 MB L2.",),
    ),
    Phrase(
        "no fp16 atomic add",
        r"\bno (?:fp16|float16|half(?:-precision)?|16-bit) atomic"
        r"|\b(?:fp16|float16|half) atomics?(?: add)? (?:does not|doesn't|do not|don't) exist",
        "CUDA has atomicAdd(__half*) from compute capability 7.0 (CUDA C++ Programming Guide, "
        "'atomicAdd'); what is missing is Numba's overload (cuda.atomic.add takes float32, "
        "float64 and 32/64-bit integers in numba-cuda 0.30): say that, or why partial sums are "
        "chosen",
        ((f"{HEAD_BEFORE_11}:solutions/04_precision.ipynb",
          "each block writes a **partial sum** (there is no fp16 atomic add, and a partial array "
          "says plainly which format held what)"),
         (f"{HEAD_BEFORE_11}:gpulab/kernels/narrow_formats.py",
          "write one **partial sum per block** instead of an atomic add: there is no fp16 atomic "
          "add on every GPU, and a partial array says plainly which format held what.")),
        fine=("CUDA C++ has an fp16 atomicAdd from compute capability 7.0, but Numba's "
              "cuda.atomic.add has no float16 overload.",
              "There is no float16 atomic add in Numba (numba-cuda 0.30)."),
        unless=r"numba|compute capability|\bcc ?7|sm_70|Volta",
    ),
    Phrase(
        "beyond 448 becomes NaN",
        r"(?:beyond|above|over|greater than|larger than|past|exceeding|>)\s*448\b" + G
        + r"{0,60}?\b(?:becomes?|is|are|turns? into|overflows? to|goes to|gives?|rounds? to)"
        r"\s+(?:a\s+)?NaN\b",
        "only a non-saturating cast (ml_dtypes' astype) turns values beyond 448 into NaN; OCP "
        "FP8 allows saturation, NVIDIA's conversions can saturate to 448 (satfinite), and the "
        "course's own quantize kernel saturates: name the cast",
        ((f"{HEAD_BEFORE_11}:solutions/04_precision.ipynb",
          "E4M3 has no infinity at all: an unscaled value beyond 448 becomes NaN."),),
        fine=("With a non-saturating cast (ml_dtypes' astype) a value beyond 448 becomes NaN; a "
              "saturating one (satfinite) clips it to 448.",),
        unless=r"saturat|satfinite|clip|clamp",
    ),
    Phrase(
        "a recorded GPU run ships with gpulab",
        r"\b(?:ships|is shipped|comes) with (?:gpulab|the course)\b",
        "no recorded GPU run ships with gpulab (there is no gpulab/data/): show one only when "
        "gpulab.bench.latest_recorded_run() finds it, and say so when it does not",
        ((f"{HEAD_BEFORE_11}:solutions/02_moving_data.ipynb",
          "A run recorded on a named GPU ships with gpulab; the next cell shows it if there is "
          "one, next to this machine's live figures."),),
        fine=("Voila ships with the `lab` extra.",
              "If a run recorded on a named GPU is found, the next cell shows it.",
              "No recorded run ships with the course yet: until one does, every GPU figure is "
              "an estimate."),
        unless=r"\bif\b[^;]{0,80}\b(?:ships|is shipped|comes) with|whether|\bnone\b|\bno\b|"
               r"\bnot\b|n't",
    ),
    Phrase(
        "100x wrong",
        r"\b100\s*(?:×|x|times)\s+(?:too\s+)?(?:wrong|off|optimistic|too fast)",
        "an uncited figure: cite the comparison (authors, title, year) or drop the number",
        ((f"{HEAD_BEFORE_11}:solutions/02_moving_data.ipynb, first cell",
          "the trap that has made published GPU-vs-library comparisons 100× wrong;"),
         (f"{HEAD_BEFORE_11}:solutions/02_moving_data.ipynb",
          "published comparisons made exactly this mistake and came out about 100× wrong.")),
        fine=("Timing the copy with the kernel made the GPU look 100× slower in the run above.",),
        unless=r"et al\.|arxiv|https?://|\b(?:19|20)\d\d\b",
    ),
    Phrase(
        "about 20 FLOP per byte, unqualified",
        r"(?<![\d.])20 FLOPs?(?: per |/)byte\b",
        "20 FLOP/byte is the H100's fp32 ridge (67 TFLOP/s / 3.35 TB/s); with BF16 tensor cores "
        "it is about 295: name the precision",
        ((f"{HEAD_BEFORE_11}:solutions/05_dense_layer.ipynb",
          "A GPU needs about 20 FLOPs per byte to keep its arithmetic busy (the *ridge point* "
          "below): the matmul (18) falls just short of it"),
         (f"{HEAD_BEFORE_11}:solutions/03_matrix_multiplication.ipynb",
          "With 4-byte floats that is **¼ FLOP per byte** if every load went to device memory — "
          "far below the H100's ridge point of 20 FLOP/byte.")),
        fine=("Its ridge point is 20 FLOP per byte for the H100 in fp32.",
              "(20 FLOP/byte for an H100 in fp32; about 295 with BF16 tensor cores)"),
        unless=r"fp32|float32|single precision|CUDA cores",
    ),
    Phrase(
        "the H100 has HBM3e",
        r"\bH100\b(?:(?!H200|B200|GB200|Blackwell)[^.\n]){0,80}\bHBM3e\b"
        r"|\bHBM3e\b" + G + r"{0,30}\b(?:of|on|in) (?:the |an? )?H100\b",
        "the H100 uses HBM3 (SXM, 3.35 TB/s) or HBM2e (PCIe, 2.0 TB/s); HBM3e is the H200's "
        "and Blackwell's memory",
        ((SEED, "The H100 has 80 GB of HBM3e at 3.35 TB/s."),
         (SEED, "the HBM3e of an H100 feeds its SMs")),
        fine=("The H100 uses HBM3 (SXM) or HBM2e (PCIe), not HBM3e; the H200 has HBM3e.",
              "H100 SXM: HBM3 at 3.35 TB/s; H200: HBM3e at 4.8 TB/s."),
        unless=r"\bnot\b|n't",
    ),
    Phrase(
        "one GPU does tens of PFLOP/s",
        r"\btens of (?:PFLOP|peta-?FLOP|petaflop)\w*"
        r"|\b(?:an?|one|each|single) (?:H100|H200|B200|GPU)\b" + G
        + r"{0,60}\b[1-9]\d(?:\.\d+)?\s*(?:PFLOP|peta-?FLOP)",
        "one H100 or B200 does about 1-4.5 PFLOP/s dense in FP8/FP16 (H100 SXM: 989 TFLOP/s "
        "BF16, 1,979 FP8; B200: 2.25 PFLOP/s BF16, 4.5 FP8); tens of PFLOP/s is a whole "
        "8-GPU server, or sparse FP4",
        ((SEED, "A single B200 does tens of PFLOP/s."),
         (SEED, "one GPU now delivers 20 PFLOP/s of AI compute")),
        fine=("One B200 does about 2.25 PFLOP/s dense in FP16; tens of PFLOP/s is a whole 8-GPU "
              "server (or sparse FP4).",
              "You may read that one GPU does \"tens of PFLOP/s\". Is it true?",
              "72 PFLOPS FP8 training and 144 PFLOPS FP4 inference (both with sparsity)"),
        unless=r"server|8-GPU|eight|rack|cluster|NVL72|DGX|HGX|sparse|sparsity|FP4|\bnot\b|whole",
    ),
    Phrase(
        "GPUs are SIMD",
        r"\bGPUs? (?:are|is) (?:an? )?SIMD\b"
        r"|\bSIMD (?:machines?|processors?|architectures?|hardware)\b",
        "GPUs are SIMT (single instruction, multiple threads): each thread has its own registers "
        "and, since Volta, its own program counter",
        ((SEED, "GPUs are SIMD machines: one instruction drives many data lanes."),),
        fine=("GPUs are SIMT, not SIMD: each thread has its own registers and program counter.",
              "A CPU's SIMD hardware (AVX-512) adds 16 floats per instruction."),
        unless=r"\bnot\b|n't|SIMT|CPU",
    ),
    Phrase(
        "a warp runs in lockstep",
        r"\b(?:run|runs|running|execute|executes|executing|move|moves|march|marches|proceed|"
        r"proceeds|step|steps)(?: \w+){0,3} in lock-?step\b"
        r"|\block-?step\b" + G + r"{0,40}\b(?:guarantee\w*|always)\b",
        "since Volta (compute capability 7.0) a warp's threads are not guaranteed to run in "
        "lockstep (independent thread scheduling): synchronise with __syncwarp / syncthreads",
        ((SEED, "The 32 threads of a warp always execute in lockstep."),
         (SEED, "the threads of a warp run in lockstep, so no barrier is needed")),
        fine=("Since Volta, the threads of a warp are not guaranteed to run in lockstep "
              "(independent thread scheduling).",
              "The two warps often happen to run in step."),
        unless=r"\bnot\b|n't|no longer|since Volta|independent thread scheduling|\bmay\b|"
               r"\bmight\b|\bcan\b|\boften\b|\busually\b|\btypically\b|syncwarp",
    ),
    Phrase(
        "no recorded run yet (stated, not looked up)",
        r"\bno recorded (?:GPU )?runs? (?:yet|so far)\b",
        "whether a recorded run exists depends on the install: print "
        "gpulab.bench.describe_recorded_run(gpulab.bench.latest_recorded_run()) instead",
        ((SEED, "There is no recorded run yet, so only the model is shown."),),
        fine=("If no run has been recorded, the cell says so.",),
        prose_only=True,
    ),
    Phrase(
        "a warp shares a row",
        r"\bwarp (?:all )?shares? a row\b",
        "with 16 x 16 blocks (8 x 8 in the simulator) a warp's 32 threads cover 2 rows of C (4 "
        "in the simulator): a warp covers 32 / blockDim.x rows",
        ((f"{HEAD_BEFORE_11}:solutions/03_matrix_multiplication.ipynb",
          "The x index runs along the columns, so the 32 threads of a warp share a row: they read "
          "the same `A[row, k]` (one broadcast)"),
         (f"{HEAD_BEFORE_11}:gpulab/kernels/matmul.py, matmul_naive",
          "# x runs along the columns: neighbours in a warp share a row")),
        fine=("threads with the same counts share a row",
              "With 16 × 16 blocks a warp covers two rows of 16 columns."),
        unless=r"\bnot\b|n't|32 ?[×x] ?\d|blockDim|32 wide|32-wide",
    ),
    Phrase(
        "8x the T4, without a precision",
        r"\b8 ?(?:×|x|times) (?:the )?T4(?:'s)?\b",
        "8x is fp32 only (67 vs 8.1 TFLOP/s); with FP16 tensor cores the H100 has about 15x "
        "the T4 (989 vs 65 TFLOP/s): name the precision",
        ((f"{HEAD_BEFORE_11}:solutions/07_training.ipynb",
          "The H100 has 8 times the T4's arithmetic and 10 times its bandwidth, yet the two "
          "estimates are almost equal"),),
        fine=("The H100 has 8 times the T4's fp32 arithmetic and 10 times its bandwidth.",),
        unless=r"fp32|float32|FP32|CUDA cores",
    ),
    Phrase(
        "the GPU may never win",
        r"\bGPU (?:may|might|will|can|could) never win\b",
        "the printed estimate (copies at the PCIe peak) says it wins from some n: model pageable "
        "and pinned copies separately and let the sentence come from the numbers",
        ((f"{HEAD_BEFORE_11}:solutions/01_dot_product.ipynb",
          "So: for small `n` the CPU wins; for large `n`, with the data already on the GPU, the "
          "GPU wins by its bandwidth ratio; if every call copies the data over first, the GPU "
          "may never win."),),
        fine=("With pageable copies on every call the GPU never wins below n = 10^8 in this "
              "model.",),
        unless=r"pageable|pinned",
    ),
    Phrase(
        "FLOPs as a rate",
        r"\b[KMGTPE]?FLOP[sS](?:/s\b| per second\b)",
        "FLOPs (lower-case s) is a count of floating-point operations; the rate is FLOP/s",
        ((SEED, "An H100 does 67 TFLOPs/s in fp32."),
         (SEED, "the peak FLOPs per second of the GPU")),
        fine=("An H100 does 67 TFLOP/s in fp32.", "how many FLOPs a kernel does per byte",
              "'67 TFLOPS', as datasheets print it"),
        case_sensitive=True,
    ),
    Phrase(
        "atomic float sums are deterministic",
        r"\batomic\w*\b" + G + r"{0,100}\b(?:deterministic|reproducible|bit-identical|the same "
        r"(?:bits|result|sum) (?:every|each) (?:run|time))\b",
        "a float sum made of atomic adds is not deterministic run to run: the order of the adds "
        "changes, and floating-point addition is not associative",
        ((SEED, "An atomic add gives a deterministic sum, whatever order the threads run in."),
         (SEED, "Atomics make the reduction reproducible.")),
        fine=("Float sums with atomics are not deterministic run to run: the order of the adds "
              "changes.",
              "Integer atomics give the same sum every run."),
        unless=r"\bnot\b|n't|non-?deterministic|nondeterministic|integer|int32|int64|\bnever\b|"
               r"\bvar(?:y|ies)\b|\bchanges?\b",
    ),
    Phrase(
        "Transformer Engine searches layer sensitivity",
        r"\b(?:[Tt]ransformer [Ee]ngine|TE)\b[^.\n]{0,150}\b(?:search\w*|[Ss]ensitiv\w*|"
        r"(?:chooses|picks|decides|finds) which layers)",
        "Transformer Engine runs its modules' matmuls in FP8 with per-tensor delayed scaling "
        "(an amax history); it does not search each layer's sensitivity",
        ((SEED, "NVIDIA's Transformer Engine searches for each layer's sensitivity and keeps the "
                "sensitive layers in higher precision."),),
        fine=("Transformer Engine runs its modules' matmuls in FP8 with per-tensor delayed "
              "scaling; it does not search layer sensitivity.",),
        unless=r"\bnot\b|n't|\bno\b|rather than|instead of",
        case_sensitive=True,
    ),
    Phrase(
        "NVL72 has 72 CPUs",
        r"\b72 (?:\w+ )?GPUs? (?:and|with|\+) 72 (?:\w+ )?CPUs?\b"
        r"|\bNVL72\b" + G + r"{0,80}\b72 (?:Grace )?CPUs?\b",
        "a GB200 NVL72 rack holds 72 Blackwell GPUs and 36 Grace CPUs (36 GB200 superchips, "
        "each one Grace and two Blackwell GPUs)",
        ((SEED, "An NVL72 rack joins 72 GPUs and 72 CPUs in one NVLink domain."),),
        fine=("a GB200 NVL72 rack (72 Blackwell GPUs and 36 Grace CPUs in one NVLink domain)",),
    ),
    Phrase(
        "an '80 GB' GPU is 74.5 GiB",
        r"\"80 ?GB\"(?: GPU)? (?:is|has|holds) 74\.5 GiB",
        "80 x 10^9 bytes is 74.5 GiB, but an '80 GB' GPU holds more: NVML reports 81,559 MiB "
        "(79.6 GiB, 85.5 GB) for an H100 80GB. The datasheet figure is nominal; `gpulab info` "
        "prints what the driver reports",
        ((f"{HEAD_BEFORE_11}:solutions/09_memory_budget.ipynb",
          "Operating systems and many tools print **GiB = 2³⁰ bytes** (also written \"GB\"): an "
          "\"80 GB\" GPU is 74.5 GiB."),
         (f"{HEAD_BEFORE_11}:solutions/09_memory_budget.ipynb, answer 5",
          "and the runtime's overhead (the CUDA context and libraries: about 1 GB or more), and "
          "that \"80 GB\" is 74.5 GiB.")),
        fine=("80 GB = 80 × 10⁹ bytes is 74.5 GiB.",),
    ),
    Phrase(
        "all 80 GB usable",
        r"\b(?:all|the full|the whole) 80 ?GB\b|\b80 ?GB\b" + G
        + r"{0,30}\b(?:usable|available to (?:you|your program|a program))\b",
        "'80 GB' is the nominal size: the driver reports its own total (`gpulab info`), and the "
        "CUDA context takes some of it before any array exists",
        ((SEED, "An H100 gives your program all 80 GB."),),
        fine=("An '80 GB' H100 is the nominal size; the driver reports 79.6 GiB.",),
        unless=r"nominal|less|datasheet|reports?",
    ),
    Phrase(
        "these peaks are for tensor cores",
        r"\b(?:these|the|all) (?:\w+ )?peaks are (?:all )?for (?:the )?tensor cores\b",
        "the fp32 row is the CUDA cores' rate (plain fp32 does not run on tensor cores; TF32 "
        "does)",
        ((f"{HEAD_BEFORE_11}:solutions/04_precision.ipynb",
          "These peaks are for tensor cores, which need dedicated matrix instructions"),),
        fine=("The fp16, bf16 and fp8 peaks are the tensor cores'; the fp32 row is the CUDA "
              "cores'.",),
    ),
    Phrase(
        "the larger batch gets through its epochs sooner (hard-coded)",
        r"\blarger batch gets through its \d+ epochs sooner\b",
        "a result written as a fact: measured here it was slower in three runs out of three; "
        "compute the sentence from the measured times",
        ((f"{OLD}:solutions/07_training.ipynb",
          "held-out accuracy; the larger batch gets through its 20 epochs sooner but has made "
          "only 60 updates"),),
    ),
    Phrase(
        "Goyal's linear scaling applied to Adam",
        r"\bGoyal\b[^\n]{0,200}?\b(?:raise|scale|increase|grow)\w*\b" + G + r"{0,40}\blearning "
        r"rate|\b(?:raise|scale|increase|grow)\w*\b" + G + r"{0,40}\blearning rate\b" + G
        + r"{0,80}\bGoyal\b",
        "Goyal et al.'s linear-scaling rule is for SGD with momentum, not the Adam the "
        "experiment uses, and the gain per batch saturates past the critical batch size",
        ((f"{HEAD_BEFORE_11}:solutions/08_batch_size.ipynb",
          "Practitioners raise the learning rate with the batch (Goyal et al., \"Accurate, Large "
          "Minibatch SGD\", 2017) — try larger learning rates for large batches in the "
          "dashboard."),),
        fine=("P. Goyal et al., \"Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour\", "
              "2017.",
              "For SGD with momentum, Goyal et al. raise the learning rate with the batch; Adam "
              "needs its own tuning."),
        unless=r"momentum|\bAdam\b|\bLARS\b|\bLAMB\b",
        unless_next=True,
    ),
    Phrase(
        "no spills, read from PTX",
        r"\bPTX\b.{0,200}?\bno spills\b|\bno spills\b.{0,120}?\bPTX\b",
        "PTX has unlimited virtual registers, so it cannot show a spill: read spills from the "
        "assembler (`ptxas -v`, `gpulab ptx --resources`)",
        (("d436ebf:solutions/03_matrix_multiplication.ipynb",
          "The PTX (compiled here, without a GPU, for an H100) says so: 64 fused multiply-adds "
          "(`fma.rn.f32`) in the inner loop and no `ld.local`/`st.local` (no spills to memory)."),),
        fine=("PTX cannot show a spill; the assembler's report (ptxas -v) says: no spills.",),
        unless=r"cannot|can't|ptxas|assembler|nvJitLink",
    ),
    # issue 20: chapters 08-09 against their own numbers (as committed at 54cc1b7)
    Phrase(
        "a GPU's memory a million times the digits step",
        r"\bmemory is a million times\b",
        "the digits step needs 428 kB: GPUs of 16 to 180 GB hold 4×10⁴ to 4×10⁵ times that",
        (("54cc1b7:solutions/09_memory_budget.ipynb",
          "the workspace is the biggest part, and a GPU's memory is a million times larger."),),
        fine=("a GPU's memory is 4 × 10⁴ (a 16 GB T4) to 4 × 10⁵ (a 180 GB B200) times larger.",),
    ),
    Phrase(
        "Llama 2 70B in bf16 just misses the H200",
        r"\bH200\b" + G + r"{0,40}\bfalls just short\b",
        "the name is rounded: the released architecture has 68.98 B parameters, 138 GB in bf16, "
        "and the H200's 141 GB holds it with the KV cache and the runtime at 99.5 %",
        (("54cc1b7:solutions/09_memory_budget.ipynb",
          "bf16: 140 GB of weights + 1.3 GB of KV cache + 1 GB: only the B200 (the H200's 141 "
          "GB falls just short)."),),
        fine=("the H200 holds it at 99.5 % of its nominal 141 GB, 0.7 GB to spare.",),
    ),
    Phrase(
        "a parameter count taken from a model's name",
        r"\b70 × 10⁹ × 16\b|\b70e9 × 16\b",
        "Llama 2 70B has 68.98 × 10⁹ parameters in its released architecture; 70 is its name",
        (("54cc1b7:solutions/09_memory_budget.ipynb",
          "3. 70 × 10⁹ × 16 / 64 = 17.5 GB of model states + 5.4 GB of activations (full "
          "recomputation) + 1 GB: about 24 GB per GPU."),),
        fine=("3. 68.98 × 10⁹ × 16 / 64 = 17.2 GB of model states.",),
    ),
    Phrase(
        "Llama 2 7B trains on no GPU without recomputation",
        r"\bno single GPU here holds 217 GB\b",
        "that keeps the a·s² attention scores, which FlashAttention never stores: Llama 2 7B "
        "without recomputation needs 126 GB (the H200 holds it), 161 GB with the scores stored",
        (("54cc1b7:solutions/09_memory_budget.ipynb",
          "Without recomputation its activations at 4,096 tokens are 104 GB more (3.3 GB per "
          "layer): no single GPU here holds 217 GB."),),
        fine=("With the scores stored they are 34 GB more: 161 GB, only the B200 (180 GB).",),
    ),
    Phrase(
        "transformer activations grow with s² whatever the attention",
        r"\bactivations grow with s²",
        "only with the attention scores stored; FlashAttention keeps 34·s·b·h bytes per layer, "
        "linear in s",
        (("54cc1b7:solutions/09_memory_budget.ipynb",
          "Transformer activations grow with s² (the attention scores): s·b·h·(34 + 5·a·s/h) "
          "bytes per layer."),),
        fine=("Transformer activations are s·b·h·(34 + 5·a·s/h) bytes per layer with the "
              "attention scores stored (growing with s²).",),
        unless=r"stored|FlashAttention|\bflash\b",
    ),
    Phrase(
        "the digits step under a ten-thousandth of an H100",
        r"\bless than a ten-thousandth of 80 GB\b",
        "with the backward pass's workspace the step at batch 4,096 needs 12.2 MB, 0.015 % "
        "(1.5 ten-thousandths) of 80 GB",
        (("54cc1b7:solutions/08_batch_size.ipynb",
          "Less than a ten-thousandth of 80 GB: for this network memory is no obstacle."),),
        fine=("About 12 MB in all, 0.015 % of 80 GB: for this network memory is no obstacle.",),
    ),
    Phrase(
        "chapter 08's launches at 4 µs",
        r"\b19\s+kernels at 4 µs\b|\b76 µs ÷ 0\.62 ns\b",
        "the model's Numba launch costs 17.85 µs (6.6 µs + 3.75 µs per array): 19 launches take "
        "339 µs, and the copy catches up near a batch of 11,000, not 2,500",
        (("54cc1b7:solutions/08_batch_size.ipynb",
          "The digits step adds about 0.62 ns of arithmetic per sample on an H100 and launches "
          "19 kernels at 4 µs."),
         ("54cc1b7:solutions/08_batch_size.ipynb",
          "1. 76 µs ÷ 0.62 ns ≈ 120,000 samples.")),
        fine=("launches 19 kernels at about 18 µs each (through Numba).",),
    ),
    # issue 20: chapter 10's speed-ups and launches (as committed at 9d2f039)
    Phrase(
        "the tensor cores' peak decides a large layer's speed",
        r"\btensor cores' peak per format decides\b",
        "a peak is an upper bound the model assumes: published cuBLAS GEMMs on an H100 reach "
        "65-81 % of it at 8192³ and 14-56 % at 1024³ (gpulab.published); say what the estimate "
        "assumes and print the published share beside it",
        (("9d2f039:gpulab/experiments/mixed_precision.py, MixedPrecisionExperiment.explain",
          "fp8 (delayed scaling) 2.87 ms (28.6x faster than fp32): there the tensor cores' peak "
          "per format decides."),
         ("9d2f039:solutions/10_mixed_precision.ipynb",
          "Speed: for this small network the model gives every format the same time; for a "
          "large layer the tensor cores' peak per format decides.")),
        fine=("For a large layer the model assumes every format runs at its tensor cores' "
              "peak.",),
    ),
    Phrase(
        "a peak ratio given as a speed-up over fp32",
        r"\dx faster than fp32\b|\}x faster than fp32\b",
        "14.6x and 28.6x are the model's times at each format's peak; published runs on an H100 "
        "measured 15.4x (bf16) and 24.9x (fp8) at 8192³ and 4.7x (bf16) at 1024³: say which",
        (("9d2f039:gpulab/experiments/mixed_precision.py, MixedPrecisionExperiment.explain",
          "For the MLP 8192-8192-8192, batch 8192: fp32 82.14 ms, bf16 mixed 5.65 ms (14.6x "
          "faster than fp32)"),),
        fine=("bf16 mixed 5.65 ms at each format's peak rate (fp32's time / 14.6).",
              "Measured speed-ups over fp32: bf16 15.4x (the peaks: 14.8x)."),
        unless=r"at (?:each format's|its|the) peak|upper bound|peaks?:",
    ),
    Phrase(
        "a digits product costs a 4 µs launch",
        r"\ba launch \(4 µs in the model\)",
        "the model's Numba launch costs 17.85 µs and the shortest kernel 2.2 µs: 20 µs per "
        "product, 100 µs for the step's five; compute it from the estimate",
        (("9d2f039:gpulab/experiments/mixed_precision.py, MixedPrecisionExperiment.explain",
          "at batch 32 each product is a launch (4 µs in the model) and almost no arithmetic, "
          "so the format hardly matters."),),
        fine=("each of its 5 products costs the model 17.9 µs for the host to launch it "
              "(Numba) and a 2.2 µs shortest kernel.",),
    ),
    # issue 20: chapter 12's dynamic batching (as committed at 9d2f039)
    Phrase(
        "a longer window gives more answers per second",
        r"\blonger window\b" + G + r"{0,80}\bmore answers per second\b",
        "the chapter's own load test never reached saturation, and on this CPU, where each "
        "request also pays for HTTP and JSON, a longer window did not raise answers per second: "
        "say what the run's rows show (gpulab.experiments.inference.serving_lines), or make it "
        "conditional on what a batch saves",
        (("9d2f039:solutions/12_inference_serving_energy.ipynb",
          "That is the trade every serving system makes: a longer window gathers bigger batches "
          "— fewer model calls per answer, more answers per second from the same hardware — and "
          "every request waits for it."),),
        fine=("Whether a longer window then buys more answers per second depends on what a batch "
              "saves.",),
        unless=r"\bwhether\b|\bif\b|\bdepends\b",
    ),
    # issue 20: chapter 11's scaling efficiency at peak compute (as committed at ccb54e6)
    Phrase(
        "peak compute is a best case for scaling efficiency",
        r"\breal runs lose more\b|\bpeak\b" + G + r"{0,80}\bbest case for both\b"
        r"|\b(?:slower|below[- ]peak) compute\b" + G + r"{0,40}\blowers? (?:the |its )?"
        r"(?:scaling )?efficiency\b",
        "efficiency = compute / (compute + exposed communication): compute below peak makes "
        "the same all-reduce a smaller share of a longer step, so it raises the efficiency (at "
        "43 % of peak, Llama 3's MFU, the 1.3B model on 4,608 H100s goes from 71 % to 85 %: "
        "gpulab.experiments.many_gpus.compute_and_links); links below line rate, imperfect "
        "overlap and stragglers lower it",
        (("ccb54e6:gpulab/experiments/many_gpus.py, ScalingExperiment.explain",
          "All estimated for an 8-GPU NVLink server (as HGX/DGX H100): roofline compute at the "
          "GPU's peak, links at full speed — a best case for both, so real runs lose more."),
         ("the same claim turned round", "Slower compute lowers the efficiency.")),
        fine=("Slower communication lowers the efficiency; slower compute raises it.",
              "The model computes at the GPU's peak: slower compute raises its efficiency, "
              "while every step takes longer.",
              "an optimistic one for the step's time (peak FLOP rates, links at full speed)"),
    ),
)

# ---------------------------------------------------------------------------------------------
# Flattening and searching

_PY_JOINS = re.compile(
    r"(?P<string>[\"']\s*\n\s*[rRbBfFuU]{0,2}[\"'])"  # "... "\n    "..." (one string)
    r"|(?P<comment>[ \t]*\n[ \t]*\#+[ \t]?)"  # consecutive comment lines
    r"|(?P<para>[ \t]*\n(?:[ \t]*\n)+[ \t]*)"  # a blank line
    r"|(?P<space>\s+)"
)
_MD_JOINS = re.compile(
    r"(?P<para>[ \t]*\n(?:[ \t]*\n)*[ \t]*(?=- |> |\||#|\d+\.\s|<)"  # a list item, table, heading
    r"|[ \t]*\n(?:[ \t]*\n)+[ \t]*)"  # or a blank line
    r"|(?P<space>\s+)"
)
_SENTENCE_END = re.compile(
    r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<!\bvs)(?<!\bcf)(?<!\bFig)(?<!\bet)(?<!\bNo)"
    r"[.!?](?=[\s)\"'*]|$)|\n"
)


def flatten(text: str, python: bool) -> tuple[str, list[int]]:
    """The text with whitespace runs as one space (paragraph breaks and list items as one line
    break) and, in Python, concatenated strings and comment runs joined; with, for every
    character, its index in ``text``."""
    joins = _PY_JOINS if python else _MD_JOINS
    out: list[str] = []
    where: list[int] = []
    position = 0
    for match in joins.finditer(text):
        out.append(text[position:match.start()])
        where.extend(range(position, match.start()))
        kind = match.lastgroup
        replacement = {"string": "", "comment": " ", "para": "\n", "space": " "}[kind]
        out.append(replacement)
        where.extend([match.start()] * len(replacement))
        position = match.end()
    out.append(text[position:])
    where.extend(range(position, len(text)))
    return "".join(out), where


def sentence_bounds(flat: str, start: int, end: int, following: bool = False) -> tuple[int, int]:
    """The sentence around flat[start:end] (and the next one, if ``following``)."""
    left = 0
    for boundary in _SENTENCE_END.finditer(flat, 0, start):
        left = boundary.end()
    right = len(flat)
    found = 0
    for boundary in _SENTENCE_END.finditer(flat, end):
        found += 1
        right = boundary.end()
        if found == (2 if following else 1):
            break
    else:
        right = len(flat)
    return left, right


# A claim quoted or attributed in order to answer it ("You may read that one GPU does 'tens of
# PFLOP/s'") is not the course making it.
_QUOTE_BEFORE = re.compile(r"[\"“‘']\s*$")
_ATTRIBUTED = re.compile(r"\byou (?:may|might|will|often) (?:read|hear|see)\b|\b(?:is|are) "
                         r"(?:often|commonly|sometimes) (?:said|claimed|quoted|written)\b|"
                         r"\bcommon (?:belief|claim|misconception)\b|\bmyth\b", re.IGNORECASE)


def false_phrases(text: str, kind: str) -> list[tuple[Phrase, int, str]]:
    """(phrase, index in ``text``, the sentence) for every false phrase in ``text``; ``kind``
    is "markdown", "code" (a notebook's code cell) or "python"."""
    flat, where = flatten(text, python=kind != "markdown")
    found = []
    for phrase in PHRASES:
        if phrase.prose_only and kind != "markdown":
            continue
        for match in phrase.regex.finditer(flat):
            left, right = sentence_bounds(flat, match.start(), match.end())
            sentence = flat[left:right].strip(" *")
            if _QUOTE_BEFORE.search(flat[left:match.start()]) or _ATTRIBUTED.search(sentence):
                continue
            if phrase.unless_regex is not None:
                u_left, u_right = sentence_bounds(flat, match.start(), match.end(),
                                                  following=phrase.unless_next)
                if phrase.unless_regex.search(flat[u_left:u_right]):
                    continue
            found.append((phrase, where[match.start()] if where else 0, sentence))
    return found


def matches(phrase: Phrase, sentence: str) -> bool:
    """Whether ``phrase`` flags ``sentence`` (scope aside)."""
    kind = "markdown"
    return any(p is phrase for p, _, _ in false_phrases(sentence, kind)) or (
        phrase.prose_only is False and any(p is phrase for p, _, _ in
                                           false_phrases(sentence, "python")))


# ---------------------------------------------------------------------------------------------
# The patterns themselves


@pytest.mark.parametrize(
    ("phrase", "where", "sentence"),
    [(p, w, s) for p in PHRASES for w, s in p.examples],
    ids=[f"{p.name} <- {w}" for p in PHRASES for w, _ in p.examples],
)
def test_pattern_matches_the_old_false_sentence(phrase, where, sentence):
    assert matches(phrase, sentence), (
        f"the pattern for {phrase.name!r} no longer matches the sentence it was written for "
        f"({where}): {sentence!r}")


@pytest.mark.parametrize(
    ("phrase", "sentence"),
    [(p, s) for p in PHRASES for s in p.fine],
    ids=[f"{p.name} spares: {s[:40]}" for p in PHRASES for s in p.fine],
)
def test_pattern_spares_a_correct_sentence(phrase, sentence):
    assert not matches(phrase, sentence), (
        f"the pattern for {phrase.name!r} flags a correct sentence: {sentence!r}")


def test_every_phrase_has_an_old_sentence_and_a_reason():
    for phrase in PHRASES:
        assert phrase.examples and phrase.why, phrase.name
        phrase.regex  # compiles  # noqa: B018
    assert len({p.name for p in PHRASES}) == len(PHRASES)


def test_a_phrase_broken_across_lines_and_strings_is_found():
    python = 'x = 1\nmessage = ("Device-memory loads per FLOP: 1/64 "\n           "of naive.")\n'
    assert [(p.name, python.count("\n", 0, i) + 1) for p, i, _ in false_phrases(python, "python")
            ] == [("1/64 of naive", 2)]
    markdown = "The 32 threads of a\nwarp share a row.\n\n- next item"
    assert [p.name for p, _, _ in false_phrases(markdown, "markdown")] == ["a warp shares a row"]
    # a qualifier in another paragraph does not excuse a sentence
    assert false_phrases("E4M3: a value beyond 448 becomes NaN\n\nA saturating cast clips.",
                         "markdown")


# ---------------------------------------------------------------------------------------------
# The course and the package

NOTEBOOKS = sorted(ROOT.glob("solutions/*.ipynb")) + sorted(ROOT.glob("course/*.ipynb"))
PYTHON = sorted((ROOT / "gpulab").rglob("*.py"))
MARKDOWN = [ROOT / "README.md"] + sorted(ROOT.glob("course/*.md"))


def _report(path: Path, place: str, found) -> list[str]:
    return [f"{path.relative_to(ROOT)} {place}: “{sentence[:300]}” — {phrase.name}: {phrase.why}"
            for phrase, _, sentence in found]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_has_no_false_phrase(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    problems = []
    for index, cell in enumerate(cells):
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        kind = "markdown" if cell["cell_type"] == "markdown" else "code"
        problems += _report(path, f"cell {index} ({kind})", false_phrases(source, kind))
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", PYTHON, ids=lambda p: str(p.relative_to(ROOT)))
def test_package_text_has_no_false_phrase(path):
    text = path.read_text(encoding="utf-8")
    problems = []
    for phrase, index, sentence in false_phrases(text, "python"):
        line = text.count("\n", 0, index) + 1
        problems += _report(path, f"line {line}", [(phrase, index, sentence)])
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_markdown_file_has_no_false_phrase(path):
    text = path.read_text(encoding="utf-8")
    problems = []
    for phrase, index, sentence in false_phrases(text, "markdown"):
        line = text.count("\n", 0, index) + 1
        problems += _report(path, f"line {line}", [(phrase, index, sentence)])
    assert not problems, "\n".join(problems)
