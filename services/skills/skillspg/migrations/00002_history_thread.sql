-- ManageSkill history (docs/deerflow.md §4.14): the agent thread a change
-- came from and the file it concerned; '' for every other event. Additive
-- (expand only), so an older replica keeps working.

-- +goose Up
ALTER TABLE skills.skill_history ADD COLUMN thread_id text NOT NULL DEFAULT '';
ALTER TABLE skills.skill_history ADD COLUMN file_path text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE skills.skill_history DROP COLUMN file_path;
ALTER TABLE skills.skill_history DROP COLUMN thread_id;
