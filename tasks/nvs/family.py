from harness.family import Family

FAMILY = Family(name="nvs", title="Novel-view synthesis")
