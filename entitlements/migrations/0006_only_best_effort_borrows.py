from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("entitlements", "0005_only_best_effort_borrows_data")]

    operations = [
        migrations.AddConstraint(
            model_name="entitlement",
            constraint=models.CheckConstraint(
                condition=models.Q(("traffic_class", "best_effort"))
                | models.Q(("borrowing_limit_cu", 0), ("overage", "throttle")),
                name="ent_only_best_effort_borrows",
            ),
        ),
    ]
