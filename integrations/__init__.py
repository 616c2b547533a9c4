"""jurybox.integrations: a jury where its users already work.

Each adapter is in its own module, imported only when used (the libraries they plug into are
optional extras):

- `.trl`: ``jury_reward(...)``, a reward function for TRL's trainers (``GRPOTrainer``).
- `.inspect`: ``jury_scorer(...)``, an Inspect AI scorer (needs ``inspect-ai``).
- `.verl`: ``compute_score``, verl's custom reward function
  (``reward.custom_reward_function.path=pkg://jurybox.integrations.verl``; ``compute_score_sync``
  for its ``remote`` reward manager).
- OpenRLHF needs no module here: ``jurybox serve`` answers its remote reward model protocol at
  ``/v1/openrlhf/{rubric}`` (``--reward.remote_url``).

All of them share `.core.JuryRewards` (items from the client's fields, verdicts from a running
service or an in-process jury, unscored samples logged with their cause) and one reward definition,
`jurybox.rubrics.reward.RewardSpec` (which number, its range, what an unscored item becomes: never a
silent 0).
"""
