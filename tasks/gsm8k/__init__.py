"""GSM8K (test split): grade-school maths word problems, final-answer exact match."""
