"""docs/workflow-format.md's reference section is exactly what the models generate."""

from __future__ import annotations

from hpcflow.spec.reference import END, START, markdown_reference, workflow_schema
from tests.conftest import REPO


def test_reference_in_docs_matches_the_schema():
    text = (REPO / "docs" / "workflow-format.md").read_text()
    assert START in text and END in text
    in_docs = text[text.index(START) : text.index(END) + len(END)]
    expected = markdown_reference(workflow_schema())
    assert in_docs == expected, (
        "docs/workflow-format.md is out of date: replace its reference section with the "
        "output of `hpcflow schema --markdown`"
    )


def test_every_task_key_is_documented():
    schema = workflow_schema()
    reference = markdown_reference(schema)
    for key in schema["$defs"]["TaskSpec"]["properties"]:
        assert f"| `{key}` |" in reference
