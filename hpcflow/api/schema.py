"""The workflow format described for editors and readers (``hpcflow schema``): its JSON
Schema, and the reference tables of docs/workflow-format.md made from it."""

from hpcflow.spec.reference import markdown_reference, workflow_schema

__all__ = ["markdown_reference", "workflow_schema"]
