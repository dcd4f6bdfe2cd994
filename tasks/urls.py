from django.urls import path

from tasks import api

urlpatterns = [
    path("tasks/", api.TaskListApi.as_view(), name="task-list"),
    path("tasks/runs/seen/", api.TaskRunsSeenApi.as_view(), name="task-runs-seen"),
    path("tasks/<str:task_id>/", api.TaskDetailApi.as_view(), name="task-detail"),
    path("tasks/<str:task_id>/runs/", api.TaskRunsApi.as_view(), name="task-runs"),
]
