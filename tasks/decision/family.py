from harness.family import Family

FAMILY = Family(name="decision", title="2-Step Agent: ML decision support")
