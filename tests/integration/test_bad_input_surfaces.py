"""The bad-input table: every input surface of hookbus, and for each class of bad input
(../shared/BAD_INPUTS.md, issue 39) the test that tries it, so that a surface without its
rows is visible in review.

A surface is a place where hookbus reads something a user gives it, or writes something
the user relies on. Each has a row for every class of its kind (:data:`READ` for what it
reads, :data:`WRITE` for what it writes), and a row is one of:

- ``"tests/path.py::test_name"`` (optionally ``[case]``): the test that tries the class on
  this surface; the file must hold that test, and the case's name must appear in it;
- :class:`NA`: the class cannot happen on this surface, and why;
- :class:`Gap`: not tried yet. Gaps are counted in :data:`GAP_COUNT`, so a new one (a new
  surface added with holes) or one closed without updating the count fails a test, which
  lists them all.

The tests below fail when a surface misses a class, points at a test that does not
exist, has no row at all, or when a ``hookbus`` command is neither a surface here nor
listed as reading no user file (:data:`NO_USER_INPUT`). Surfaces owned by other helpers
point at their own modules (shards, sharded checkpoints, weights files, sbatch).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from hookbus.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[2]

READ = (
    "missing",
    "empty",
    "truncated",
    "garbled",
    "wrong type or another tool's",
    "huge claimed size or deep nesting",
    "sparse 8 GB file",
    "FIFO",
    "/dev/zero link",
    "symlink loop or broken link",
    "directory for a file, or the reverse",
    "unreadable",
    "changed or removed during the run",
)
"""The classes of what a surface reads."""

WRITE = (
    "read-only destination",
    "full disk",
    "kill mid-write, then a rerun",
    "the destination is an input",
)
"""The classes of what a surface writes."""


@dataclass(frozen=True)
class NA:
    """The class cannot happen on this surface: ``why``."""

    why: str


@dataclass(frozen=True)
class Gap:
    """The class is not tried on this surface yet: ``what`` is missing."""

    what: str


Row = str | NA | Gap

BR = "tests/runner/test_bounded_reads.py"
EMBED = "tests/runner/test_embed_bad_inputs.py"
CANNOT_USE = "test_an_image_it_cannot_use_is_refused_in_one_line_naming_it"
EXPORT = "tests/runner/test_export_safety.py"
EVAL = "tests/runner/test_eval_bad_inputs.py"
PLOT = "tests/runner/test_plot_safety.py"
WORKERS = "tests/runner/test_loader_worker_errors.py"
PHOTOS = "tests/runner/test_bad_inputs_image_folders.py"
PHOTOS_ROW = "test_a_bad_input_in_the_image_folder_is_one_line_exit_2"
CKPT = "tests/kernel/test_checkpoint_io.py"
TRUST = "tests/runner/test_checkpoint_trust.py"
WRITES = "tests/integration/test_write_failures.py"
WEIGHTS = "tests/integration/test_bad_inputs_weights.py"
FSDP = "tests/integration/test_fsdp.py"
SHARDS = "tests/integration/test_shards.py"
S3 = "tests/integration/test_shards_s3.py"
BAD_SHARDS = "tests/integration/test_bad_inputs_shards.py"
BAD_SHARDS_S3 = "tests/integration/test_bad_inputs_shards_s3.py"
BAD_CKPT = "tests/integration/test_bad_inputs_sharded_ckpt.py"
READ_SHARDS = "test_a_bad_shard_set_is_one_line_naming_the_file_before_the_first_step"
WRITE_SHARDS = "test_shard_onto_a_full_or_read_only_disk_is_one_line_exit_1_and_nothing_named_out"
RESUME_CKPT = "test_a_damaged_sharded_checkpoint_is_skipped_for_the_previous_one_on_resume"
END = "tests/integration/test_end_of_run.py"
KILLS = "tests/integration/test_kill_resume.py"
UNREADABLE = (
    "tests/integration/test_unreadable_inputs.py::"
    "test_what_may_not_be_read_is_one_line_naming_it_and_nothing_is_written"
)
KILLED = (
    "tests/integration/test_kills_mid_write.py::"
    "test_a_kill_mid_write_leaves_no_output_and_a_rerun_equals_a_clean_run"
)

SURFACES: dict[str, dict[str, Row]] = {
    "recipe (train, validate, hooks)": {
        "missing": f"{BR}::test_a_missing_recipe_keeps_its_message",
        "empty": "tests/runner/test_bad_input.py::test_arbitrary_text_files_are_refused_cleanly",
        "truncated": "tests/runner/test_bad_input_table.py::test_validate_refuses_it_in_one_line",
        "garbled": "tests/runner/test_bad_input.py::test_arbitrary_text_files_are_refused_cleanly",
        "wrong type or another tool's": "tests/kernel/test_yaml_safety.py::"
        "test_python_tags_are_refused_as_invalid_yaml",
        "huge claimed size or deep nesting": "tests/kernel/test_yaml_safety.py::"
        "test_an_alias_bomb_is_refused_at_once",
        "sparse 8 GB file": f"{BR}::test_a_sparse_4_gib_recipe_is_refused_naming_the_limit",
        "FIFO": f"{BR}::test_a_fifo_recipe_is_refused_without_waiting",
        "/dev/zero link": f"{BR}::test_a_recipe_that_is_dev_zero_is_refused_at_once",
        "symlink loop or broken link": f"{BR}::test_a_recipe_that_is_a_link_to_nothing_is_named_so"
        "[a symbolic link loop]",
        "directory for a file, or the reverse": f"{BR}::"
        "test_check_regular_refuses_a_directory_without_opening_it",
        "unreadable": f"{UNREADABLE}[a recipe]",
        "changed or removed during the run": f"{BR}::"
        "test_a_file_that_grows_past_the_limit_while_read_is_refused",
    },
    "checkpoint read on resume": {
        "missing": f"{CKPT}::test_checkpoint_without_its_checksum_is_not_trusted",
        "empty": f"{CKPT}::"
        "test_a_zero_byte_newest_with_its_checksum_file_is_skipped_for_the_previous_one",
        "truncated": f"{CKPT}::test_truncated_newest_is_skipped",
        "garbled": f"{CKPT}::test_corrupt_newest_is_skipped_for_the_previous_one",
        "wrong type or another tool's": "tests/runner/test_checkpoint_contents.py::"
        "test_a_newest_checkpoint_that_does_not_fit_is_skipped_for_the_previous_one",
        "huge claimed size or deep nesting": "tests/runner/test_checkpoint_contents.py::"
        "test_a_newest_checkpoint_that_does_not_fit_is_skipped_for_the_previous_one",
        "sparse 8 GB file": f"{BR}::test_a_truncated_checkpoint_is_refused_before_it_is_hashed",
        "FIFO": f"{BR}::test_a_fifo_checkpoint_with_a_sidecar_is_refused_without_waiting",
        "/dev/zero link": f"{TRUST}::test_a_link_to_a_file_outside_the_directory_is_not_followed",
        "symlink loop or broken link": f"{CKPT}::test_dangling_pointer_falls_back_to_the_files",
        "directory for a file, or the reverse": "tests/runner/test_run_dir_hostile.py::"
        "test_the_wrong_kind_of_entry_is_named",
        "unreadable": f"{TRUST}::test_a_newest_checkpoint_that_fails_verifying_is_skipped",
        "changed or removed during the run": f"{KILLS}::"
        "test_a_run_killed_three_times_and_resumed_equals_an_uninterrupted_one",
    },
    "checkpoint writes and the run directory": {
        "read-only destination": f"{WRITES}::"
        "test_files_opened_at_start_on_a_read_only_disk_name_the_file",
        "full disk": "tests/runner/test_failures.py::"
        "test_full_disk_reports_the_error_and_leaves_the_previous_checkpoint",
        "kill mid-write, then a rerun": f"{CKPT}::"
        "test_a_kill_between_the_sidecar_and_the_checkpoint_leaves_a_resumable_folder",
        "the destination is an input": "tests/runner/test_run_files.py::"
        "test_validate_and_train_refuse_a_link_out_and_write_nothing",
    },
    "training image folder (photos)": {
        "missing": f"{PHOTOS}::{PHOTOS_ROW}[missing folder]",
        "empty": f"{PHOTOS}::{PHOTOS_ROW}[empty folder]",
        "truncated": f"{PHOTOS}::{PHOTOS_ROW}[truncated JPEG]",
        "garbled": f"{PHOTOS}::test_a_corrupt_jpeg_prints_exactly_one_line_in_a_real_process",
        "wrong type or another tool's": f"{PHOTOS}::{PHOTOS_ROW}[text named .png]",
        "huge claimed size or deep nesting": f"{PHOTOS}::{PHOTOS_ROW}"
        "[PNG claiming 100000 x 100000 pixels]",
        "sparse 8 GB file": f"{PHOTOS}::{PHOTOS_ROW}[sparse 8 GiB JPEG]",
        "FIFO": f"{PHOTOS}::{PHOTOS_ROW}[FIFO named .jpg]",
        "/dev/zero link": f"{PHOTOS}::{PHOTOS_ROW}[link to /dev/zero]",
        "symlink loop or broken link": f"{PHOTOS}::{PHOTOS_ROW}[symbolic link loop]",
        "directory for a file, or the reverse": f"{PHOTOS}::{PHOTOS_ROW}[a file for the folder]",
        "unreadable": f"{WORKERS}::test_a_subfolder_that_cannot_be_listed_is_an_error",
        "changed or removed during the run": f"{WORKERS}::"
        "test_an_image_removed_after_the_listing_is_named_with_workers",
    },
    "hookbus embed: its images": {
        "missing": "tests/runner/test_embed.py::"
        "test_a_user_error_is_one_line_exit_2_and_writes_nothing",
        "empty": f"{EMBED}::{CANNOT_USE}[an empty .jpg]",
        "truncated": f"{EMBED}::{CANNOT_USE}[a truncated JPEG]",
        "garbled": "tests/runner/test_embed.py::test_an_unreadable_image_is_named",
        "wrong type or another tool's": f"{EMBED}::"
        "test_a_folder_of_nothing_but_unusable_images_is_refused_even_when_skipping",
        "huge claimed size or deep nesting": f"{EMBED}::{CANNOT_USE}[a 60000 x 1 strip]",
        "sparse 8 GB file": f"{EMBED}::{CANNOT_USE}[an 8 GiB sparse .jpg]",
        "FIFO": f"{EMBED}::{CANNOT_USE}[a FIFO named .jpg]",
        "/dev/zero link": f"{EMBED}::{CANNOT_USE}[a link to /dev/zero named .jpg]",
        "symlink loop or broken link": f"{EMBED}::{CANNOT_USE}[a symbolic link loop]",
        "directory for a file, or the reverse": f"{EMBED}::"
        "test_a_folder_named_like_an_image_given_as_one_is_refused",
        "unreadable": f"{EMBED}::test_a_folder_that_cannot_be_listed_is_one_line_or_skipped",
        "changed or removed during the run": f"{EMBED}::"
        "test_an_image_removed_after_the_walk_is_named",
    },
    "hookbus embed: its output": {
        "read-only destination": f"{EMBED}::test_a_read_only_folder_is_one_line_exit_1",
        "full disk": f"{EMBED}::test_a_full_disk_is_one_line_exit_1_and_a_rerun_equals_a_clean_run",
        "kill mid-write, then a rerun": f"{EMBED}::"
        "test_a_kill_during_embedding_leaves_no_output_and_a_rerun_equals_a_clean_run",
        "the destination is an input": f"{EMBED}::"
        "test_an_output_that_is_an_input_is_refused_and_the_input_kept"
        "[an input image inside the folder]",
    },
    "hookbus embed and export: the checkpoint or exported file read": {
        "missing": "tests/runner/test_embed.py::"
        "test_a_user_error_is_one_line_exit_2_and_writes_nothing",
        "empty": f"{EMBED}::test_a_source_embed_cannot_load_is_one_line_naming_it[an empty file]",
        "truncated": f"{TRUST}::test_export_refuses_a_checkpoint_that_does_not_match_its_checksum",
        "garbled": f"{TRUST}::test_export_refuses_a_checkpoint_that_does_not_match_its_checksum",
        "wrong type or another tool's": "tests/runner/test_checkpoint_contents.py::"
        "test_export_refuses_weights_that_do_not_fit_the_backbone",
        "huge claimed size or deep nesting": "tests/runner/test_checkpoint_contents.py::"
        "test_export_of_a_misfit_checkpoint_is_one_line_exit_2",
        "sparse 8 GB file": f"{EMBED}::test_a_source_embed_cannot_load_is_one_line_naming_it"
        "[an 8 GiB sparse file]",
        "FIFO": f"{EXPORT}::test_a_fifo_as_source_is_refused_without_waiting",
        "/dev/zero link": f"{EXPORT}::test_a_device_as_source_is_refused",
        "symlink loop or broken link": f"{EMBED}::"
        "test_a_source_export_meets_as_a_link_loop_is_one_line",
        "directory for a file, or the reverse": f"{TRUST}::"
        "test_export_to_a_directory_is_one_line_exit_2",
        "unreadable": f"{UNREADABLE}[the checkpoint export reads]",
        "changed or removed during the run": NA(
            "read once, verified against its checksum file before anything is used"
        ),
    },
    "hookbus export: its output": {
        "read-only destination": f"{EXPORT}::test_a_read_only_folder_is_one_line_exit_1",
        "full disk": f"{EXPORT}::test_a_full_disk_is_one_line_exit_1_and_leaves_nothing",
        "kill mid-write, then a rerun": f"{KILLED}[export]",
        "the destination is an input": f"{EXPORT}::"
        "test_the_checkpoint_itself_is_refused_and_stays_intact",
    },
    "hookbus eval: its labelled folder and feature cache": {
        "missing": f"{EVAL}::test_a_bad_labelled_folder_is_one_line",
        "empty": f"{EVAL}::test_a_bad_labelled_folder_is_one_line",
        "truncated": f"{EVAL}::test_a_bad_cache_is_said_and_computed_again",
        "garbled": f"{EVAL}::test_a_bad_cache_is_said_and_computed_again",
        "wrong type or another tool's": f"{EVAL}::test_a_bad_cache_is_said_and_computed_again",
        "huge claimed size or deep nesting": f"{EVAL}::test_a_bad_cache_is_said_and_computed_again"
        "[a huge feature matrix claimed]",
        "sparse 8 GB file": f"{EVAL}::test_a_bad_labelled_folder_is_one_line",
        "FIFO": f"{EVAL}::test_a_cache_that_is_no_file_is_one_line",
        "/dev/zero link": f"{EVAL}::test_a_cache_that_is_no_file_is_one_line",
        "symlink loop or broken link": f"{EVAL}::test_a_bad_labelled_folder_is_one_line",
        "directory for a file, or the reverse": f"{EVAL}::"
        "test_a_cache_folder_that_is_a_file_is_one_line",
        "unreadable": f"{UNREADABLE}[eval's labelled folder]",
        "changed or removed during the run": f"{EVAL}::"
        "test_an_image_removed_after_eval_listed_the_folder_is_one_line_and_no_eval_json",
    },
    "hookbus eval and report: their output": {
        "read-only destination": "tests/runner/test_report.py::"
        "test_a_read_only_place_is_one_line_exit_1",
        "full disk": f"{EVAL}::test_a_disk_that_fails_is_one_line_exit_1_and_nothing_half_written",
        "kill mid-write, then a rerun": f"{KILLED}[eval]",
        "the destination is an input": f"{EVAL}::test_the_run_files_are_never_an_output",
    },
    "hookbus plot: curves and metrics": {
        "missing": f"{PLOT}::test_a_run_without_curves_json_is_drawn_from_its_metrics",
        "empty": f"{PLOT}::test_curves_json_that_holds_nothing_is_one_line_naming_it[empty]",
        "truncated": f"{TRUST}::test_plot_of_a_corrupt_curves_file_is_one_line_exit_2",
        "garbled": f"{TRUST}::test_plot_of_a_corrupt_curves_file_is_one_line_exit_2",
        "wrong type or another tool's": f"{TRUST}::"
        "test_plot_of_a_corrupt_curves_file_is_one_line_exit_2",
        "huge claimed size or deep nesting": f"{PLOT}::"
        "test_deeply_nested_curves_are_one_line_naming_the_limit",
        "sparse 8 GB file": f"{PLOT}::test_a_sparse_file_over_the_limit_is_refused_naming_it",
        "FIFO": f"{PLOT}::test_curves_that_are_a_fifo_are_refused_without_waiting",
        "/dev/zero link": f"{PLOT}::test_curves_linked_to_dev_zero_are_refused_not_plotted",
        "symlink loop or broken link": f"{PLOT}::"
        "test_curves_json_that_holds_nothing_is_one_line_naming_it[a symbolic link loop]",
        "directory for a file, or the reverse": f"{PLOT}::"
        "test_metrics_that_are_a_directory_are_one_line",
        "unreadable": f"{UNREADABLE}[curves.json]",
        "changed or removed during the run": NA("read once, whole, before drawing"),
    },
    "hookbus plot: its output": {
        "read-only destination": f"{PLOT}::test_a_read_only_run_directory_is_one_line_exit_1",
        "full disk": f"{PLOT}::test_a_full_disk_is_one_line_exit_1_and_leaves_nothing",
        "kill mid-write, then a rerun": f"{KILLED}[plot]",
        "the destination is an input": f"{PLOT}::"
        "test_an_output_over_a_file_the_run_keeps_is_refused",
    },
    "end-of-run work (evaluation.json, curves.png)": {
        "read-only destination": f"{END}::"
        "test_a_run_directory_turned_read_only_at_the_end_is_one_line_and_the_work_stays_owed",
        "full disk": f"{END}::test_a_disk_full_at_the_end_is_one_line_and_the_work_stays_owed",
        "kill mid-write, then a rerun": f"{END}::"
        "test_two_sigterms_inside_the_end_work_leave_it_owed_and_a_rerun_equals_a_clean_run",
        "the destination is an input": "tests/runner/test_run_dir_hostile.py::"
        "test_the_wrong_kind_of_entry_is_named",
    },
    "weights files (foundation)": {
        "missing": f"{WEIGHTS}::test_a_missing_file",
        "empty": f"{WEIGHTS}::test_a_bad_file_is_one_line_naming_it[empty]",
        "truncated": f"{WEIGHTS}::test_a_bad_file_is_one_line_naming_it[truncated]",
        "garbled": f"{WEIGHTS}::test_a_bad_file_is_one_line_naming_it[garbled pickle]",
        "wrong type or another tool's": f"{WEIGHTS}::test_another_models_keys_are_listed",
        "huge claimed size or deep nesting": f"{WEIGHTS}::test_a_bad_file_is_one_line_naming_it"
        "[safetensors, huge header claimed]",
        "sparse 8 GB file": f"{WEIGHTS}::"
        "test_a_bad_file_is_one_line_naming_it[sparse 8 GB of zeros]",
        "FIFO": f"{WEIGHTS}::test_what_is_no_regular_file_is_refused_without_reading[fifo]",
        "/dev/zero link": f"{WEIGHTS}::test_what_is_no_regular_file_is_refused_without_reading"
        "[link to /dev/zero]",
        "symlink loop or broken link": f"{WEIGHTS}::"
        "test_what_is_no_regular_file_is_refused_without_reading[link loop]",
        "directory for a file, or the reverse": f"{WEIGHTS}::"
        "test_what_is_no_regular_file_is_refused_without_reading[directory]",
        "unreadable": f"{UNREADABLE}[a weights file]",
        "changed or removed during the run": NA("read once, before the run directory exists"),
    },
    "shard sets, local and S3 cache (shards)": {
        "missing": f"{BAD_SHARDS}::{READ_SHARDS}[missing shard]",
        "empty": f"{BAD_SHARDS}::{READ_SHARDS}[empty shard]",
        "truncated": f"{BAD_SHARDS}::{READ_SHARDS}[truncated shard]",
        "garbled": f"{BAD_SHARDS}::{READ_SHARDS}[garbled shard]",
        "wrong type or another tool's": f"{BAD_SHARDS}::{READ_SHARDS}"
        "[another writer's string labels]",
        "huge claimed size or deep nesting": f"{BAD_SHARDS}::{READ_SHARDS}[index nested deep]",
        "sparse 8 GB file": f"{BAD_SHARDS}::{READ_SHARDS}[sparse 8 GiB shard]",
        "FIFO": f"{BAD_SHARDS}::{READ_SHARDS}[shard a FIFO]",
        "/dev/zero link": f"{BAD_SHARDS}::{READ_SHARDS}[shard a link to /dev/zero]",
        "symlink loop or broken link": f"{BAD_SHARDS}::{READ_SHARDS}[shard a symbolic link loop]",
        "directory for a file, or the reverse": f"{BAD_SHARDS_S3}::"
        "test_a_cache_folder_that_is_no_folder_is_one_line_naming_the_key[the cache folder a file]",
        "unreadable": f"{BAD_SHARDS}::test_an_unreadable_shard_is_one_line_before_the_first_step",
        "changed or removed during the run": f"{BAD_SHARDS}::"
        "test_a_shard_changed_during_the_run_is_one_line_exit_1_and_the_checkpoint_stays",
    },
    "hookbus shard: its output (shards)": {
        "read-only destination": f"{BAD_SHARDS}::{WRITE_SHARDS}[read-only]",
        "full disk": f"{BAD_SHARDS}::{WRITE_SHARDS}[full]",
        "kill mid-write, then a rerun": f"{BAD_SHARDS}::"
        "test_shard_killed_mid_write_leaves_nothing_named_out_and_a_rerun_equals_a_clean_run",
        "the destination is an input": f"{SHARDS}::"
        "test_shard_refuses_an_existing_output_and_a_file_that_is_no_image",
    },
    "sharded (FSDP) checkpoints (shards)": {
        "missing": f"{BAD_CKPT}::{RESUME_CKPT}[the metadata missing]",
        "empty": f"{BAD_CKPT}::{RESUME_CKPT}[the metadata empty]",
        "truncated": f"{BAD_CKPT}::{RESUME_CKPT}[a shard truncated]",
        "garbled": f"{BAD_CKPT}::{RESUME_CKPT}[the metadata garbled]",
        "wrong type or another tool's": f"{BAD_CKPT}::{RESUME_CKPT}"
        "[a pickle payload in the metadata]",
        "huge claimed size or deep nesting": f"{BAD_CKPT}::{RESUME_CKPT}"
        "[a 10**12-element tensor claimed]",
        "sparse 8 GB file": f"{BAD_CKPT}::{RESUME_CKPT}[a shard sparse 8 GiB]",
        "FIFO": f"{BAD_CKPT}::{RESUME_CKPT}[a storage path to a FIFO outside the folder]",
        "/dev/zero link": f"{BAD_CKPT}::{RESUME_CKPT}[the metadata a link to /dev/zero]",
        "symlink loop or broken link": f"{BAD_CKPT}::{RESUME_CKPT}[a shard a symbolic link loop]",
        "directory for a file, or the reverse": f"{BAD_CKPT}::{RESUME_CKPT}[a shard a folder]",
        "unreadable": f"{BAD_CKPT}::test_an_unreadable_shard_is_one_line_from_export",
        "changed or removed during the run": f"{FSDP}::test_a_corrupt_shard_is_refused_by_export",
    },
    "hookbus sbatch: the script it writes (clusters)": {
        "read-only destination": NA("printed on standard output; see standard output"),
        "full disk": NA("printed on standard output; see standard output"),
        "kill mid-write, then a rerun": NA("printed on standard output, nothing half written"),
        "the destination is an input": "tests/runner/test_sbatch.py::"
        "test_a_bad_override_is_refused_before_anything_is_printed",
    },
    "standard output (schema, recipes, sbatch)": {
        "read-only destination": NA("a descriptor given by the shell"),
        "full disk": f"{WRITES}::test_standard_output_to_a_full_device_is_one_line_exit_1",
        "kill mid-write, then a rerun": f"{WRITES}::test_standard_output_closed_early_ends_quietly",
        "the destination is an input": NA("a descriptor given by the shell"),
    },
}
"""Every input surface and its rows (see the module's docstring)."""

GAP_COUNT = 0
"""How many rows are gaps today: a change that adds a surface with holes, or closes one,
updates it, in review."""

NO_USER_INPUT = {
    "schema": "prints the config schema",
    "recipes": "prints shipped recipes",
    "models": "lists the backbone names hookbus can build",
}
"""``hookbus`` commands that read no user file, with why."""

COMMAND_SURFACES = {
    "train": "recipe (train, validate, hooks)",
    "validate": "recipe (train, validate, hooks)",
    "hooks": "recipe (train, validate, hooks)",
    "plot": "hookbus plot: curves and metrics",
    "export": "hookbus export: its output",
    "embed": "hookbus embed: its images",
    "eval": "hookbus eval: its labelled folder and feature cache",
    "report": "hookbus eval and report: their output",
    "shard": "hookbus shard: its output (shards)",
    "sbatch": "hookbus sbatch: the script it writes (clusters)",
}
"""The surface each ``hookbus`` command's own input or output is under."""


@cache
def functions_in(path: str) -> frozenset[str]:
    """The test functions defined in the file ``path`` (relative to the repository)."""
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.name.startswith("test_")
    )


def pointers() -> list[tuple[str, str, str]]:
    return [
        (surface, kind, row)
        for surface, rows in SURFACES.items()
        for kind, row in rows.items()
        if isinstance(row, str)
    ]


@pytest.mark.parametrize("surface", list(SURFACES))
def test_every_surface_has_a_row_for_every_class_of_its_kind(surface: str) -> None:
    kinds = tuple(SURFACES[surface])
    assert kinds in (READ, WRITE), f"{surface}: rows for {kinds}, not the classes of READ or WRITE"


@pytest.mark.parametrize("surface", list(SURFACES))
def test_every_surface_has_a_test_that_tries_it(surface: str) -> None:
    tried = [row for row in SURFACES[surface].values() if isinstance(row, str)]
    assert tried, f"{surface} has no row that points at a test"


@pytest.mark.parametrize(("surface", "kind", "row"), pointers(), ids=lambda v: str(v)[:60])
def test_every_row_points_at_a_test_that_exists(surface: str, kind: str, row: str) -> None:
    path, _, name = row.partition("::")
    name, _, case = name.partition("[")
    assert (ROOT / path).is_file(), f"{surface} / {kind}: no file {path}"
    assert name in functions_in(path), f"{surface} / {kind}: no {name} in {path}"
    if case:
        assert case.rstrip("]") in (ROOT / path).read_text(), f"no case {case} in {path}"


def test_the_gaps_are_counted() -> None:
    gaps = [
        f"{surface} / {kind}: {row.what}"
        for surface, rows in SURFACES.items()
        for kind, row in rows.items()
        if isinstance(row, Gap)
    ]
    assert len(gaps) == GAP_COUNT, "\n".join(gaps)


def test_every_command_is_a_surface_or_reads_no_user_file() -> None:
    for command in COMMANDS:
        assert command in NO_USER_INPUT or COMMAND_SURFACES.get(command) in SURFACES, (
            f"hookbus {command}: add its input surface to SURFACES (and COMMAND_SURFACES), "
            "or to NO_USER_INPUT with why"
        )
