-- ManageSkill history (docs/deerflow.md §4.14): the agent thread a change
-- came from and the file it concerned; '' for every other event.
ALTER TABLE skill_history ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
ALTER TABLE skill_history ADD COLUMN file_path TEXT NOT NULL DEFAULT '';
