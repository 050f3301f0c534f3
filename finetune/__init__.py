"""LoRA repair of audio LMs on VocalGrad (SPEC §6), publishing adapters and results to the Hub.

train.py      the entry point (`vocalgrad-finetune`, `accelerate launch finetune/train.py`): orchestration only
settings.py   TrainSettings (the recipe, the resume fingerprint), the run directory's names, the command line
recipe.py     a recipe as declared data (recipes/*.yaml: stages, what each trains, data, lr, length)
stages.py     a recipe made concrete: each stage's data and length, the micro-batch plan, full or LoRA, init adapter
mixture.py    training data by declaration: several configs mixed by weight, each stage's data set
mapped.py     a foreign dataset read as a task kind's rows (--dataset --kind --columns, the harness' mapping)
data.py       train/validation ids from the generator (stratified split, per-epoch order), rows rendered on demand
augment.py    optional nuisance augmentation (audiomentations) that leaves the trained attribute alone
objective.py  the prompt + answer a row is trained on and the answer-token cross-entropy
pclm.py       PCLM training: which stage each step is in and what it trains, the DPO reference snapshot, files
lora.py       PEFT LoRA: scope targets, injection, adapter tensors and files, activation checkpointing
loop.py       the training loop: optimizer and schedule, resume, optimizer steps, logging, checkpoints
checkpoint.py checkpoints (adapter, optimizer, scheduler, every process's RNG) that a killed run resumes from
record.py     training.json, the record of a finished run
evaluate.py   validation on clips; after training the harness evaluation, the matrix and the card
report.py     the cross-category matrix (Figure 4) as a table and a PNG heatmap
card.py       the model card and `.eval_results/vocalgrad.yaml`
hub.py        staging and pushing adapters (model repos) and evaluation runs (a results dataset repo)
"""
