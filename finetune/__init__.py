"""LoRA repair of audio LMs on VocalGrad (SPEC §6), publishing adapters and results to the Hub.

data.py     train/validation ids from the generator (stratified split, per-epoch order), rows rendered on demand
augment.py  optional nuisance augmentation (audiomentations) that leaves the trained attribute alone
train.py    the `accelerate launch finetune/train.py` entry point: PEFT LoRA, checkpoints, resume, evaluation
report.py   the cross-category matrix (Figure 4) as a table and a PNG heatmap
card.py     the model card and `.eval_results/vocalgrad.yaml`
hub.py      staging and pushing adapters (model repos) and evaluation runs (a results dataset repo)
"""
