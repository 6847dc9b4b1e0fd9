"""Operations: health, metrics, alarms, and what on-call does (the operator page and commands)."""
